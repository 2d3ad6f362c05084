"""Building blocks for fixes: small, formatting-preserving libcst node edits."""
from __future__ import annotations

import libcst as cst


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def add_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """`f(a, b)` -> `f(a, b, new)`, laid out as a person would: in a call laid out one argument
    a line, the new argument gets a line of its own at the other arguments' indentation (with a
    trailing comma when the call had one); otherwise it follows `, `. Comments stay where they
    were and no line ends in a space."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    separator = _argument_separator(args, call)
    one_a_line = isinstance(separator, cst.ParenthesizedWhitespace)
    if isinstance(last.comma, cst.Comma):  # a trailing comma: it stays last
        after_comma = last.comma.whitespace_after
        if one_a_line and isinstance(after_comma, cst.ParenthesizedWhitespace):  # `b,  # note` then `)`
            args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=_next_line(after_comma, separator)))
            new_comma = cst.Comma(whitespace_after=_bare(after_comma))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_bare(separator)))
            new_comma = last.comma
        args.append(arg.with_changes(comma=new_comma))
    elif isinstance(last.whitespace_after_arg, cst.ParenthesizedWhitespace):  # `b` then `)` on its own line
        closing = last.whitespace_after_arg
        if one_a_line:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_next_line(closing, separator)),
                                         whitespace_after_arg=cst.SimpleWhitespace(""))
            args.append(arg.with_changes(whitespace_after_arg=_bare(closing)))
        else:  # `f(a, b  # note` then `)`: the new argument joins the line, before the comment
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                                         whitespace_after_arg=cst.SimpleWhitespace(""))
            args.append(arg.with_changes(whitespace_after_arg=closing))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_bare(separator)))
        args.append(arg)
    return call.with_changes(args=args)


def _argument_separator(args: list[cst.Arg], call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """What stands between two arguments of this call: a line break when they are laid out one a
    line, else a space."""
    if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
        return args[-2].comma.whitespace_after
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return call.whitespace_before_args
    return cst.SimpleWhitespace(" ")


def _bare(whitespace: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """The same separation without what it carried (a comment, blank lines, trailing spaces)."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return cst.ParenthesizedWhitespace(indent=whitespace.indent, last_line=whitespace.last_line)
    return cst.SimpleWhitespace(" ")


def _next_line(line_end: cst.ParenthesizedWhitespace, separator: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
    """`line_end`'s comment and blank lines, then the indentation of the next argument."""
    return line_end.with_changes(indent=separator.indent, last_line=separator.last_line)


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """Drop one argument; the commas around it (and any comment after them) stay in place."""
    args = list(call.args)
    index = args.index(arg)
    del args[index]
    if args and index == len(args) and not isinstance(arg.comma, cst.Comma):
        last = args[-1]  # it now ends the call: `f(a, x=1)` -> `f(a)`, unless its comma holds a line break
        if isinstance(last.comma, cst.Comma) and isinstance(last.comma.whitespace_after, cst.SimpleWhitespace):
            args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def string(value: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{value}"')


def device_of(name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name(name), attr=cst.Name("device"))


def method_call(receiver: str, method: str, args: list[cst.Arg]) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=cst.Name(receiver), attr=cst.Name(method)), args=add_commas(args))


def add_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [a.with_changes(comma=comma) for a in args[:-1]] + args[-1:]
