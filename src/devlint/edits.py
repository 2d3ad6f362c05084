"""Building blocks for fixes: small, formatting-preserving libcst node edits."""
from __future__ import annotations

import libcst as cst

from devlint import syntax


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


def loaded_into_load_state_dict(path, copies: bool = False) -> bool:
    """Whether the value made by path[-1] goes straight into `<x>.load_state_dict(...)`,
    possibly through constant subscripts (`torch.load(p)["model"]`). With copies=True, only
    where the module copies the tensors onto its own device (not `assign=True`)."""
    i = len(path) - 1
    while i > 0 and isinstance(path[i - 1], cst.Subscript) and path[i - 1].value is path[i]:
        i -= 1
    if i < 2:
        return False
    arg, call = path[i - 1], path[i - 2]
    return (
        isinstance(arg, cst.Arg)
        and arg.keyword is None
        and isinstance(call, cst.Call)
        and syntax.method_name(call) == "load_state_dict"
        and syntax.positional(call)[:1] == [arg]
        and not (copies and _assigns(call))
    )


def _assigns(call: cst.Call) -> bool:
    """`load_state_dict(sd, assign=...)` with anything but a literal False (or a star-argument)."""
    if syntax.has_star_args(call) or len(syntax.positional(call)) > 2:
        return True
    assign = syntax.keyword(call, "assign")
    return assign is not None and syntax.dotted_name(assign.value) != "False"
