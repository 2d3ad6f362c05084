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
    """`f(a, b)` -> `f(a, b, new)`, keeping the call's layout (one line, or one argument a line)."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the call is laid out one argument a line
        separator = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else cst.Comma(
            whitespace_after=call.whitespace_before_args
        )
        args[-1] = last.with_changes(comma=separator)
        args.append(arg.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(arg)
    return call.with_changes(args=args)


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
