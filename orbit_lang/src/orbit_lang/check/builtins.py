"""Static signatures of the built-in functions (chapter 27).

Each function checks its arguments with the expression checker and returns
the call's type and IR. JSON arguments are accepted everywhere: the
evaluator checks them at run time.
"""

from __future__ import annotations

from collections.abc import Callable

from orbit_core.ir import expr as e
from orbit_core.ir.types import ListType, MapType, OptionalType, RecordType
from orbit_lang import ast
from orbit_lang.check.report import did_you_mean
from orbit_lang.check.typed import Checking, Typed
from orbit_lang.check.types import (
    BOOL,
    FLOAT,
    INT,
    JSON,
    NULL,
    STRING,
    NullType,
    Type,
    is_json,
    is_number,
    is_optional,
    join,
    render,
    strip,
)
from orbit_lang.diagnostics import Label

COLLECTION = ("map", "filter", "find", "any", "all")

SIGNATURES = {
    "coalesce": "coalesce(a: T?, b: T?, ..., z: T) -> T",
    "is_null": "is_null(x: T) -> Bool",
    "len": "len(x: String | List<T> | Map<String, T>) -> Int",
    "string": "string(x: T) -> String",
    "int": "int(x: Int | Float | String | Bool) -> Int",
    "float": "float(x: Int | Float | String | Bool) -> Float",
    "contains": "contains(haystack, needle) -> Bool",
    "lower": "lower(s: String) -> String",
    "upper": "upper(s: String) -> String",
    "trim": "trim(s: String) -> String",
    "join": "join(items: List<T>, separator: String) -> String",
    "keys": "keys(m: Map<String, T>) -> List<String>",
    "min": "min(a: number, b: number, ...) -> number",
    "max": "max(a: number, b: number, ...) -> number",
    "abs": "abs(x: number) -> number",
    "sum": "sum(list: List<Int> | List<Float>) -> Int | Float",
    "map": "map(list: List<T>, f: T => U) -> List<U>",
    "filter": "filter(list: List<T>, f: T => Bool) -> List<T>",
    "find": "find(list: List<T>, f: T => Bool) -> T?",
    "any": "any(list: List<T>, f: T => Bool) -> Bool",
    "all": "all(list: List<T>, f: T => Bool) -> Bool",
}
# (least, most) arguments; None for no upper bound.
ARITY: dict[str, tuple[int, int | None]] = {
    "coalesce": (1, None),
    "min": (1, None),
    "max": (1, None),
    "contains": (2, 2),
    "join": (2, 2),
    **dict.fromkeys(COLLECTION, (2, 2)),
}


def check_call(checker: Checking, node: ast.Call) -> Typed:

    name = node.function.name
    if name not in SIGNATURES:
        checker.error(
            "E0407",
            f"unknown function `{name}`",
            node.function.span,
            help=did_you_mean(name, SIGNATURES)
            or "see the built-in functions: " + ", ".join(f"`{n}`" for n in SIGNATURES),
        )
        for argument in node.arguments:
            if not isinstance(argument, ast.Lambda):
                checker.infer(argument)
        return checker.poison()
    least, most = ARITY.get(name, (1, 1))
    count = len(node.arguments)
    if count < least or (most is not None and count > most):
        _arity_error(checker, node, least, most)
        return checker.poison()
    if name in COLLECTION:
        return _collection(checker, node)
    args = [checker.infer(a) for a in node.arguments]
    result, float_sum = _RULES[name](checker, node, args)
    return Typed(result, e.Call(name, tuple(a.ir for a in args), float_sum))


def _arity_error(checker: Checking, node: ast.Call, least: int, most: int | None) -> None:
    name = node.function.name
    if most is None:
        wanted = f"at least {least} argument{'s' if least > 1 else ''}"
    elif least == most:
        wanted = f"{least} argument{'s' if least > 1 else ''}"
    else:
        wanted = f"{least} to {most} arguments"
    checker.error(
        "E0407",
        f"`{name}` takes {wanted}, found {len(node.arguments)}",
        node.span,
        notes=[f"signature: `{SIGNATURES[name]}`"],
    )


def _argument_error(
    checker: Checking, node: ast.Call, index: int, wanted: str, found: Type
) -> None:
    checker.error(
        "E0400",
        f"argument {index + 1} of `{node.function.name}` must be {wanted}, found `{render(found)}`",
        node.arguments[index].span,
    )


Rule = Callable[[Checking, ast.Call, list[Typed]], tuple[Type, bool]]


def _coalesce(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    result: Type = args[0].type
    for arg, arg_node in zip(args[1:], node.arguments[1:], strict=True):
        combined = join(result, arg.type)
        if combined is None:
            checker.error(
                "E0400",
                f"arguments of `coalesce` have incompatible types `{render(result)}` and "
                f"`{render(arg.type)}`",
                arg_node.span,
                labels=[Label(node.arguments[0].span, f"`{render(args[0].type)}`")],
            )
            return JSON, False
        result = combined
    if any(not is_optional(a.type) for a in args):
        result = strip(result)
    return result, False


def _is_null(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    return BOOL, False


def _len(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    t = strip(args[0].type)
    if not (is_json(t) or t in (STRING, NULL) or isinstance(t, ListType | MapType)):
        _argument_error(checker, node, 0, "a String, List or Map", args[0].type)
    return INT, False


def _string(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    return STRING, False


def _converter(result: Type) -> Rule:
    def rule(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
        t = strip(args[0].type)
        if not (is_json(t) or is_number(t) or t in (STRING, BOOL, NULL)):
            _argument_error(checker, node, 0, "an Int, Float, String or Bool", args[0].type)
        return result, False

    return rule


def _contains(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    return BOOL, False


def _text(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    t = args[0].type
    if is_json(t):
        return JSON, False
    if isinstance(t, NullType):
        return OptionalType(STRING), False
    if strip(t) != STRING:
        _argument_error(checker, node, 0, "a String", t)
        return STRING, False
    return t, False


def _join(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    t = strip(args[0].type)
    if not (is_json(t) or isinstance(t, ListType | NullType)):
        _argument_error(checker, node, 0, "a List", args[0].type)
    checker.require(args[1], STRING, node.arguments[1].span)
    return STRING, False


def _keys(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    t = strip(args[0].type)
    if not (is_json(t) or isinstance(t, MapType | RecordType | NullType)):
        _argument_error(checker, node, 0, "a Map", args[0].type)
    return ListType(STRING), False


def _extreme(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    all_int = True
    for index, arg in enumerate(args):
        t = arg.type
        if is_json(t):
            all_int = False
            continue
        if not is_number(t):
            _argument_error(checker, node, index, "an Int or Float", t)
            return JSON, False
        all_int = all_int and t == INT
    return (INT if all_int else FLOAT), False


def _abs(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    t = args[0].type
    if is_json(t):
        return JSON, False
    if not is_number(t):
        _argument_error(checker, node, 0, "an Int or Float", t)
        return JSON, False
    return t, False


def _sum(checker: Checking, node: ast.Call, args: list[Typed]) -> tuple[Type, bool]:
    t = strip(args[0].type)
    if is_json(t) or isinstance(t, NullType):
        return JSON, False
    if isinstance(t, ListType):
        if t.items == INT:
            return INT, False
        if t.items == FLOAT:
            return FLOAT, True
        if is_json(t.items):
            return JSON, False
    _argument_error(checker, node, 0, "a List of Int or Float", args[0].type)
    return JSON, False


_RULES: dict[str, Rule] = {
    "coalesce": _coalesce,
    "is_null": _is_null,
    "len": _len,
    "string": _string,
    "int": _converter(INT),
    "float": _converter(FLOAT),
    "contains": _contains,
    "lower": _text,
    "upper": _text,
    "trim": _text,
    "join": _join,
    "keys": _keys,
    "min": _extreme,
    "max": _extreme,
    "abs": _abs,
    "sum": _sum,
}


def _collection(checker: Checking, node: ast.Call) -> Typed:

    name = node.function.name
    items_node, function = node.arguments
    items = checker.infer(items_node)
    t = strip(items.type)
    element: Type
    if is_json(t) or isinstance(t, NullType):
        element = JSON
    elif isinstance(t, ListType):
        element = t.items
    else:
        _argument_error(checker, node, 0, "a List", items.type)
        element = JSON
    if not isinstance(function, ast.Lambda):
        checker.infer(function)
        checker.error("E0400", f"argument 2 of `{name}` must be a lambda", function.span)
        return checker.poison()
    param = function.parameter
    if param.name in set(checker.in_scope()):
        checker.error(
            "E0413",
            f"lambda parameter `{param.name}` shadows a name already in scope",
            param.span,
            help="choose another name for the parameter",
        )
    checker.params.append((param.name, element))
    try:
        body = checker.check(function.body, None if name == "map" else BOOL)
    finally:
        checker.params.pop()
    ir = e.Call(name, (items.ir, e.Lambda(param.name, body.ir)))
    result: Type
    if name == "map":
        result = ListType(JSON if isinstance(body.type, NullType) else body.type)
    elif name == "filter":
        result = ListType(element)
    elif name == "find":
        result = element if is_optional(element) else OptionalType(element)
    else:
        result = BOOL
    return Typed(result, ir)
