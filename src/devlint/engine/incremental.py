"""Parsing a buffer again after an edit, at the cost of the statements that changed.

libcst parses a 2,000-line file in about half a second, most of what a check costs; an editor
asks again after every pause in typing, and usually one top-level statement has changed.
`ChunkParser` cuts the text into module-level statements (where `ast`, ten times cheaper,
says they start and end), parses each chunk with libcst once, and builds the module from the
chunks' statements. A chunk runs from its statement's first line (a decorator's, for a
decorated definition) to the line before the next statement: the blank and comment lines
after a statement, which libcst gives to the next statement (or to the end of a block),
are parsed with the chunk before them and moved where a parse of the whole file puts them.

Each chunk's tree must print back to its text under the file's default indentation and
newline, or the whole file is parsed as usual; so is a text `ast` rejects (the whole-file
parse reports the error as the command line does) and a chunk libcst rejects.
"""
from __future__ import annotations

import re
from typing import Optional

import libcst as cst

_NEWLINE = re.compile(r"\r\n?|\n")  # libcst's and ast's line breaks
MAX_MERGED = 3  # chunks tried together before the whole file is parsed
_LINE = re.compile(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+\Z")


class _Chunk:
    __slots__ = ("module", "header", "statements", "footer", "trailing_newline", "indent", "newline", "has_block")

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.header = module.header
        self.statements = module.body
        self.footer = module.footer
        self.trailing_newline = module.has_trailing_newline
        self.indent, self.newline = module.default_indent, module.default_newline
        self.has_block = any(_has_indented_block(s) for s in self.statements)


class ChunkParser:
    """`parse(source)`, the same tree as `libcst.parse_module(source)`, reusing the chunks
    of the previous texts."""

    def __init__(self) -> None:
        self._chunks: dict[str, Optional[_Chunk]] = {}
        self._prints_back: dict[tuple[str, str, str], bool] = {}
        self.reused = self.parsed = 0  # chunks, for the record

    def parse(self, source: str) -> cst.Module:
        from devlint import engine

        module = self._parse(source)
        return module if module is not None else engine.parse(source)

    def _parse(self, source: str) -> Optional[cst.Module]:
        texts = _chunk_texts(source)
        if texts is None or len(texts) < 2:
            return None
        chunks, kept, merged, i = [], {}, [], 0
        while i < len(texts):
            text, i = texts[i], i + 1
            chunk = self._chunk(text, kept)
            # A chunk libcst cannot print back alone (a blank line, then a comment indented less
            # than the block before it, at its end) is fine with the statement after it.
            for _ in range(MAX_MERGED):
                if chunk is not None or i == len(texts):
                    break
                text, i = text + texts[i], i + 1
                chunk = self._chunk(text, kept)
            if chunk is None:
                self._chunks = kept
                return None
            chunks.append(chunk)
            merged.append(text)
        self._chunks = kept  # what this text needs: the cache follows the buffer
        texts = merged
        match = _NEWLINE.search(source)
        newline = match.group(0) if match else "\n"
        # libcst's default indentation is the file's first INDENT's: the first chunk's that has one
        indent = next((c.indent for c in chunks if c.has_block), "    ")
        prints_back = {}
        for text, chunk in zip(texts, chunks):
            # Parsed alone, a chunk inferred its own defaults: it must print back under the file's.
            if (chunk.indent, chunk.newline) != (indent, newline):
                key = (text, indent, newline)
                ok = self._prints_back.get(key)
                if ok is None:
                    ok = chunk.module.with_changes(default_indent=indent, default_newline=newline).code == text
                prints_back[key] = ok
                if not ok:
                    return None
        self._prints_back = prints_back
        first = chunks[0]
        body, carried = list(first.statements), first.footer
        for chunk in chunks[1:]:
            statement = chunk.statements[0]
            leading = (*carried, *chunk.header, *statement.leading_lines)
            if len(leading) != len(statement.leading_lines):
                statement = statement.with_changes(leading_lines=leading)
            body += [statement, *chunk.statements[1:]]
            carried = chunk.footer
        return cst.Module(body=body, header=first.header, footer=carried, encoding="utf-8",
                          default_indent=indent, default_newline=newline,
                          has_trailing_newline=chunks[-1].trailing_newline)

    def _chunk(self, text: str, kept: dict) -> Optional[_Chunk]:
        if text in kept:  # the same text twice in one buffer: each place needs nodes of its own
            self.parsed += 1
            return _parse_chunk(text)
        if text in self._chunks:
            chunk = self._chunks[text]
            self.reused += 1
        else:
            chunk = _parse_chunk(text)
            self.parsed += 1
        kept[text] = chunk
        return chunk


def _parse_chunk(text: str) -> Optional[_Chunk]:
    try:
        module = cst.parse_module(text)
    except Exception:  # noqa: BLE001 - the whole text is parsed then, and its error reported
        return None
    if not module.body or module.code != text:  # libcst drops a blank line before a last, outdented comment
        return None
    return _Chunk(module)


def _chunk_texts(source: str) -> Optional[list[str]]:
    """The texts of the module-level statements: from each one's first line to the line
    before the next one's (statements sharing a line stay together); None where `ast`
    rejects the source."""
    from devlint.core.positions import module_body

    try:
        body = module_body(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not body:
        return None
    starts, end = [], 0
    for node in body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        if first > end:
            starts.append(first)
        end = max(end, node.end_lineno or node.lineno)
    lines = _LINE.findall(source)
    starts[0] = 1  # the module's header goes with the first statement
    bounds = starts + [len(lines) + 1]
    return ["".join(lines[a - 1:b - 1]) for a, b in zip(bounds, bounds[1:])]


def _has_indented_block(statement: cst.CSTNode) -> bool:
    """Whether libcst read an INDENT in this statement: its first one sets the default."""
    stack = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.IndentedBlock):
            return True
        stack.extend(node.children)
    return False
