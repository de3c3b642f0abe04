"""Every built-in function of chapter 27, one table row per example and edge case."""

from __future__ import annotations

from typing import Any

import pytest
from evalkit import INT_MAX, INT_MIN, b, call, error_of, inp, lam, run, same, var

from orbit_core.eval.compiler import LAMBDA_OUTSIDE_CALL
from orbit_core.evaluate import Scope
from orbit_core.ir import expr as e
from orbit_core.jsontypes import JsonValue

DATA: dict[str, Any] = {
    "nothing": None,
    "n": 7,
    "f": 2.5,
    "t": True,
    "s": "text",
    "labels": {"team": "payments", "area": "billing"},
    "tags": ["vip", "new"],
    "nums": [1, 2],
    "mixed": [1, 2.5],
    "floats": [1.5, 2.5],
    "bad": [1, "a"],
    "bools": [True],
    "users": [
        {"email": "Ann@Example.com", "name": "Ann", "active": True},
        {"email": "BOB@example.com", "name": "Bob", "active": False},
        {"email": "cy@example.com", "name": "Cy", "active": True},
    ],
    "stock": [{"sku": "A", "stock": 3}, {"sku": "B", "stock": 9}, {"sku": "C", "stock": 0}],
    "addresses": [
        {"city": "Lyon", "primary": False},
        {"city": "Oslo", "primary": True},
        {"city": "Rome", "primary": True},
    ],
    "maybe": [{"ok": True}, {"ok": None}, {"ok": False}],
    "zero_one": [1, 0],
    "big": [INT_MAX, 1],
    "huge_floats": [1e308, 1e308],
}
SCOPE = Scope(input=DATA, vars={"loop": 10})

U = inp("users")
ITEM = "u"

# fmt: off
VALUE_ROWS: list[tuple[str, Any, Any]] = [
    # coalesce
    ('coalesce(null, null, "customer")', call("coalesce", None, inp("nothing"), "customer"), "customer"),
    ("coalesce(null, null)", call("coalesce", None, None), None),
    ("coalesce(null)", call("coalesce", None), None),
    ("coalesce(input.discount, 0)", call("coalesce", inp("nothing"), 0), 0),
    ("coalesce(0, 1) keeps a falsy value", call("coalesce", 0, 1), 0),
    ('coalesce("", "x")', call("coalesce", "", "x"), ""),
    ("coalesce(false, true)", call("coalesce", False, True), False),
    ("coalesce(7)", call("coalesce", inp("n")), 7),
    # is_null
    ("is_null(null)", call("is_null", None), True),
    ("is_null(0)", call("is_null", 0), False),
    ('is_null("")', call("is_null", ""), False),
    ("!is_null(input.coupon)", e.Unary("not", call("is_null", inp("coupon"))), False),
    ("is_null(missing.field)", call("is_null", inp("nothing", "x")), True),
    # len
    ('len("héllo")', call("len", "héllo"), 5),
    ('len("\\u{1F680}")', call("len", "\U0001f680"), 1),
    ('len("")', call("len", ""), 0),
    ("len([1, 2])", call("len", [1, 2]), 2),
    ("len(map)", call("len", inp("labels")), 2),
    ("len({})", call("len", {}), 0),
    ("len(null)", call("len", inp("nothing")), 0),
    # string
    ('string("x")', call("string", "x"), "x"),
    ("string(null)", call("string", None), "null"),
    ("string(42)", call("string", 42), "42"),
    ("string(-7)", call("string", -7), "-7"),
    ("string(1.5)", call("string", 1.5), "1.5"),
    ("string(2.0)", call("string", 2.0), "2.0"),
    ("string(float(5))", call("string", call("float", 5)), "5.0"),
    ("string(-0.0)", call("string", -0.0), "-0.0"),
    ("string(0.1 + 0.2)", call("string", b("add", 0.1, 0.2)), "0.30000000000000004"),
    ("string(1e15)", call("string", 1e15), "1000000000000000.0"),
    ("string(1e16)", call("string", 1e16), "1e16"),
    ("string(1.2345e20)", call("string", 1.2345e20), "1.2345e20"),
    ("string(0.00001)", call("string", 0.00001), "0.00001"),
    ("string(0.000001)", call("string", 0.000001), "1e-6"),
    ("string(1.5e-7)", call("string", 1.5e-7), "1.5e-7"),
    ("string(max)", call("string", INT_MAX), "9223372036854775807"),
    ("string(true)", call("string", True), "true"),
    ("string(false)", call("string", False), "false"),
    ("string([1, 2])", call("string", [1, 2]), "[1,2]"),
    ("string({ a: 1 })", call("string", {"a": 1}), '{"a":1}'),
    ("string keeps key order", call("string", {"b": 1, "a": [None, True, 2.0]}), '{"b":1,"a":[null,true,2.0]}'),
    ("string escapes like JSON", call("string", ['a"\\\n\t\x01']), '["a\\"\\\\\\n\\t\\u0001"]'),
    ("string keeps non-ASCII", call("string", {"é": "ü🚀"}), '{"é":"ü🚀"}'),
    ("string of a nested float", call("string", {"x": [1e16]}), '{"x":[1e16]}'),
    ("string of a string holding e+", call("string", ["1e+5", 1e16]), '["1e+5",1e16]'),
    ("string(input.attempt) in a label", b("add", "order-", call("string", inp("n"))), "order-7"),
    # int
    ("int(7)", call("int", 7), 7),
    ("int(2.9)", call("int", 2.9), 2),
    ("int(-2.9)", call("int", -2.9), -2),
    ("int(2.0)", call("int", 2.0), 2),
    ("int(-0.5)", call("int", -0.5), 0),
    ('int(" 42 ")', call("int", " 42 "), 42),
    ('int("-7")', call("int", "-7"), -7),
    ('int("+7")', call("int", "+7"), 7),
    ('int("007")', call("int", "007"), 7),
    ('int("\\t42\\n")', call("int", "\t42\n"), 42),
    ('int("\\u{3000}42")', call("int", "\u300042"), 42),
    ('int("9223372036854775807")', call("int", "9223372036854775807"), INT_MAX),
    ('int("-9223372036854775808")', call("int", "-9223372036854775808"), INT_MIN),
    ("int(true)", call("int", True), 1),
    ("int(false)", call("int", False), 0),
    ("int(input.f)", call("int", inp("f")), 2),
    ("int(9.2e18)", call("int", 9.2e18), 9200000000000000000),
    # float
    ("float(5)", call("float", 5), 5.0),
    ("float(2.5)", call("float", 2.5), 2.5),
    ('float("2.5")', call("float", "2.5"), 2.5),
    ('float(" 2.5 ")', call("float", " 2.5 "), 2.5),
    ('float("-3")', call("float", "-3"), -3.0),
    ('float("1e3")', call("float", "1e3"), 1000.0),
    ('float("1.5E-2")', call("float", "1.5E-2"), 0.015),
    ('float(".5")', call("float", ".5"), 0.5),
    ('float("5.")', call("float", "5."), 5.0),
    ("float(true)", call("float", True), 1.0),
    ("float(false)", call("float", False), 0.0),
    ("float(max)", call("float", INT_MAX), 9.223372036854776e18),
    # contains
    ('contains("hello", "ell")', call("contains", "hello", "ell"), True),
    ('contains("hello", "")', call("contains", "hello", ""), True),
    ('contains("hello", "xyz")', call("contains", "hello", "xyz"), False),
    ("contains([1, 2], 2.0)", call("contains", [1, 2], 2.0), True),
    ("contains([1, 2], 3)", call("contains", [1, 2], 3), False),
    ('contains(input.tags, "vip")', call("contains", inp("tags"), "vip"), True),
    ("contains([[1, 2]], [1.0, 2])", call("contains", [[1, 2]], [1.0, 2]), True),
    ("contains([{a: 1}], {a: 1})", call("contains", [{"a": 1}], {"a": 1}), True),
    ("contains([true], 1)", call("contains", inp("bools"), 1), False),
    ("contains([null], null)", call("contains", [None], None), True),
    ("contains([], 1)", call("contains", [], 1), False),
    ('contains(map, "team")', call("contains", inp("labels"), "team"), True),
    ('contains(map, "payments") tests keys', call("contains", inp("labels"), "payments"), False),
    ('contains(null, "x")', call("contains", inp("nothing"), "x"), False),
    ('contains(lower(email), "@example.com")', call("contains", call("lower", "Ann@EXAMPLE.com"), "@example.com"), True),
    # lower, upper, trim
    ('lower("ÀB")', call("lower", "ÀB"), "àb"),
    ('lower("ΣΑΣ") ends with a final sigma', call("lower", "ΣΑΣ"), "σας"),
    ("lower(null)", call("lower", inp("nothing")), None),
    ('upper("straße")', call("upper", "straße"), "STRASSE"),
    ('upper("àb")', call("upper", "àb"), "ÀB"),
    ("upper(null)", call("upper", None), None),
    ('trim("  x  ")', call("trim", "  x  "), "x"),
    ("trim of Unicode spaces", call("trim", "\u3000\u00a0\u2028 x y\t\n\u205f"), "x y"),
    ("trim keeps U+001C (not White_Space)", call("trim", "\x1cx"), "\x1cx"),
    ("trim keeps U+200B (not White_Space)", call("trim", "\u200bx"), "\u200bx"),
    ("trim(null)", call("trim", None), None),
    ('lower(trim(" A@B.C "))', call("lower", call("trim", " A@B.C ")), "a@b.c"),
    # join
    ('join([1, 2], ",")', call("join", [1, 2], ","), "1,2"),
    ('join(skus, ", ")', call("join", ["A", "B"], ", "), "A, B"),
    ('join([], ",")', call("join", [], ","), ""),
    ('join(["only"], ",")', call("join", ["only"], ","), "only"),
    ("join of mixed items", call("join", [1.5, None, True, "s", {"a": 1}, [2.0]], "|"), '1.5|null|true|s|{"a":1}|[2.0]'),
    ('join(["a", "b"], "")', call("join", ["a", "b"], ""), "ab"),
    # keys
    ("keys(map) in JSON order", call("keys", inp("labels")), ["team", "area"]),
    ("keys of a record", call("keys", {"b": 1, "a": 2}), ["b", "a"]),
    ("keys({})", call("keys", {}), []),
    # min and max
    ("max(3, 2.5) returns 3", call("max", 3, 2.5), 3),
    ("min(3, 2.5)", call("min", 3, 2.5), 2.5),
    ("max(1, min(700, 500))", call("max", 1, call("min", inp("n"), 500)), 7),
    ("max(1, min(0, 500))", call("max", 1, call("min", 0, 500)), 1),
    ("max(2, 2.0): the first wins", call("max", 2, 2.0), 2),
    ("max(2.0, 2): the first wins", call("max", 2.0, 2), 2.0),
    ("min(2.0, 2)", call("min", 2.0, 2), 2.0),
    ("min(2, 2.0)", call("min", 2, 2.0), 2),
    ("min(5)", call("min", 5), 5),
    ("max(1, 9, 3)", call("max", 1, 9, 3), 9),
    ("min(-1.5, -1)", call("min", -1.5, -1), -1.5),
    ("max(max, max - 1)", call("max", INT_MAX - 1, INT_MAX), INT_MAX),
    # abs
    ("abs(-5)", call("abs", -5), 5),
    ("abs(5)", call("abs", 5), 5),
    ("abs(-2.5)", call("abs", -2.5), 2.5),
    ("abs(-0.0)", call("abs", -0.0), 0.0),
    ("abs(min + 1)", call("abs", INT_MIN + 1), INT_MAX),
    # sum
    ("sum([]) is the integer 0", call("sum", []), 0),
    ("sum([]) of a List<Float> is 0.0 (RULINGS §3)", call("sum", [], float_sum=True), 0.0),
    ("sum(null)", call("sum", inp("nothing")), 0),
    ("sum(null) of a List<Float>?", call("sum", inp("nothing"), float_sum=True), 0.0),
    ("sum([1, 2])", call("sum", inp("nums")), 3),
    ("sum of integers typed List<Float> stays integral", call("sum", inp("nums"), float_sum=True), 3),
    ("sum([1, 2.5])", call("sum", inp("mixed")), 3.5),
    ("sum([1.5, 2.5])", call("sum", inp("floats")), 4.0),
    ("sum([0.1, 0.2, 0.3]) adds left to right", call("sum", [0.1, 0.2, 0.3]), 0.6000000000000001),
    ("sum([max, -1, 1])", call("sum", [INT_MAX, -1, 1]), INT_MAX),
    ("sum of huge floats is null", call("sum", inp("huge_floats")), None),
    # map, filter, find, any, all
    ("map(users, u => lower(u.email))", call("map", U, lam(ITEM, call("lower", var(ITEM, "email")))), ["ann@example.com", "bob@example.com", "cy@example.com"]),
    ("map(null, ...) is []", call("map", inp("nothing"), lam("v", 1)), []),
    ("map([], ...)", call("map", [], lam("v", b("div", 1, 0))), []),
    ("map reads the loop variable and input", call("map", inp("nums"), lam("v", b("add", b("mul", var("v"), var("loop")), inp("n")))), [17, 27]),
    ("nested lambdas", call("map", [1, 2], lam("a", call("map", [10, 20], lam("c", b("mul", var("a"), var("c")))))), [[10, 20], [20, 40]]),
    ("inner parameter does not leak", call("map", [1], lam("a", [call("map", [2], lam("c", var("c"))), var("a"), var("c")])), [[[2], 1, None]]),
    ("map to a literal", call("map", inp("nums"), lam("v", {"v": var("v")})), [{"v": 1}, {"v": 2}]),
    ("filter(stock, i => i.stock < 5)", call("map", call("filter", inp("stock"), lam("i", b("lt", var("i", "stock"), 5))), lam("i", var("i", "sku"))), ["A", "C"]),
    ("filter: a null predicate counts as false", call("filter", inp("maybe"), lam("m", var("m", "ok"))), [{"ok": True}]),
    ("filter(null, ...)", call("filter", None, lam("v", True)), []),
    ("filter keeps the elements themselves", call("filter", inp("mixed"), lam("v", True)), [1, 2.5]),
    ("find the first match", call("find", inp("addresses"), lam("a", var("a", "primary"))), {"city": "Oslo", "primary": True}),
    ("coalesce(find(...).city, ...)", call("coalesce", e.Get(call("find", inp("addresses"), lam("a", var("a", "primary"))), "city"), "unknown"), "Oslo"),
    ("find with no match is null", call("find", inp("addresses"), lam("a", False)), None),
    ("coalesce(find(none).city, unknown)", call("coalesce", e.Get(call("find", [], lam("a", True)), "city"), "unknown"), "unknown"),
    ("find: a null predicate counts as false", call("find", inp("maybe"), lam("m", b("eq", var("m", "ok"), None))), {"ok": None}),
    ("find(null, ...)", call("find", inp("nothing"), lam("v", True)), None),
    ("any(users, u => u.active)", call("any", U, lam(ITEM, var(ITEM, "active"))), True),
    ("any([], ...) is false", call("any", [], lam("v", True)), False),
    ("any(null, ...) is false", call("any", None, lam("v", True)), False),
    ("any with only null predicates", call("any", [1, 2], lam("v", None)), False),
    ("any stops at the first true", call("any", inp("zero_one"), lam("v", b("gt", b("div", 10, var("v")), 1))), True),
    ("all(users, u => u.active)", call("all", U, lam(ITEM, var(ITEM, "active"))), False),
    ("all([], ...) is true", call("all", [], lam("v", False)), True),
    ("all(null, ...) is true", call("all", None, lam("v", False)), True),
    ("all with a null predicate is false", call("all", [1], lam("v", None)), False),
    ("all stops at the first false", call("all", [5, 0], lam("v", b("lt", var("v"), 1))), False),
    ("all true", call("all", inp("nums"), lam("v", b("gt", var("v"), 0))), True),
]
# fmt: on


@pytest.mark.parametrize(
    ("expr", "expected"), [(r[1], r[2]) for r in VALUE_ROWS], ids=[r[0] for r in VALUE_ROWS]
)
def test_value(expr: Any, expected: Any) -> None:
    assert same(run(expr, SCOPE), expected)


# fmt: off
ERROR_ROWS: list[tuple[str, Any, str]] = [
    ("coalesce evaluates every argument", call("coalesce", 1, b("div", 1, 0)), "division by zero"),
    ("len(7)", call("len", inp("n")), "argument 1 of `len` must be a String, List or Map, found an integer"),
    ("len(true)", call("len", True), "argument 1 of `len` must be a String, List or Map, found a boolean"),
    ('int("1.5")', call("int", "1.5"), 'cannot convert "1.5" to Int'),
    ('int("abc")', call("int", "abc"), 'cannot convert "abc" to Int'),
    ('int("")', call("int", ""), 'cannot convert "" to Int'),
    ('int("1_000")', call("int", "1_000"), 'cannot convert "1_000" to Int'),
    ('int("٣") (not an ASCII digit)', call("int", "٣"), 'cannot convert "٣" to Int'),
    ('int("1e3")', call("int", "1e3"), 'cannot convert "1e3" to Int'),
    ('int("9223372036854775808")', call("int", "9223372036854775808"), 'cannot convert "9223372036854775808" to Int'),
    ("int(1e19)", call("int", 1e19), "cannot convert 1e19 to Int"),
    ("int(-1e300)", call("int", -1e300), "cannot convert -1e300 to Int"),
    ("int(null)", call("int", inp("nothing")), "cannot convert null to Int"),
    ("int([1])", call("int", [1]), "cannot convert an array to Int"),
    ("int({})", call("int", {}), "cannot convert an object to Int"),
    ("a long string is shortened", call("int", "x" * 100), 'cannot convert "' + "x" * 40 + '…" to Int'),
    ('float("abc")', call("float", "abc"), 'cannot convert "abc" to Float'),
    ('float("")', call("float", ""), 'cannot convert "" to Float'),
    ('float("inf")', call("float", "inf"), 'cannot convert "inf" to Float'),
    ('float("NaN")', call("float", "NaN"), 'cannot convert "NaN" to Float'),
    ('float("1e999")', call("float", "1e999"), 'cannot convert "1e999" to Float'),
    ('float("1_0")', call("float", "1_0"), 'cannot convert "1_0" to Float'),
    ('float("0x10")', call("float", "0x10"), 'cannot convert "0x10" to Float'),
    ("float(null)", call("float", None), "cannot convert null to Float"),
    ("float([1.5])", call("float", [1.5]), "cannot convert an array to Float"),
    ("float(10**400)", call("float", inp("vast")), "cannot convert an integer to Float"),
    ('contains("hello", 1)', call("contains", "hello", 1), "argument 2 of `contains` must be a String when argument 1 is a String, found an integer"),
    ("contains(map, 1)", call("contains", inp("labels"), 1), "argument 2 of `contains` must be a String when argument 1 is a Map, found an integer"),
    ("contains(5, 1)", call("contains", 5, 1), "argument 1 of `contains` must be a String, List or Map, found an integer"),
    ("contains(true, true)", call("contains", True, True), "argument 1 of `contains` must be a String, List or Map, found a boolean"),
    ("lower(1)", call("lower", 1), "argument 1 of `lower` must be a String, found an integer"),
    ("upper([])", call("upper", []), "argument 1 of `upper` must be a String, found an array"),
    ("trim({})", call("trim", {}), "argument 1 of `trim` must be a String, found an object"),
    ('join(null, ",")', call("join", inp("nothing"), ","), "argument 1 of `join` must be a List, found null"),
    ('join("ab", ",")', call("join", "ab", ","), "argument 1 of `join` must be a List, found a string"),
    ("join([1], 1)", call("join", [1], 1), "argument 2 of `join` must be a String, found an integer"),
    ("join([1], null)", call("join", [1], None), "argument 2 of `join` must be a String, found null"),
    ("keys(null)", call("keys", inp("nothing")), "argument 1 of `keys` must be a Map, found null"),
    ("keys([1])", call("keys", [1]), "argument 1 of `keys` must be a Map, found an array"),
    ("max(null, 1)", call("max", inp("nothing"), 1), "argument 1 of `max` must be an Int or Float, found null"),
    ('min(1, "a")', call("min", 1, "a"), "argument 2 of `min` must be an Int or Float, found a string"),
    ("max(true)", call("max", True), "argument 1 of `max` must be an Int or Float, found a boolean"),
    ("abs(min)", call("abs", INT_MIN), "integer overflow"),
    ('abs("x")', call("abs", "x"), "argument 1 of `abs` must be an Int or Float, found a string"),
    ("abs(null)", call("abs", None), "argument 1 of `abs` must be an Int or Float, found null"),
    ("sum([max, 1])", call("sum", inp("big")), "integer overflow"),
    ("sum([max, 1, -1]) overflows on the way", call("sum", [INT_MAX, 1, -1]), "integer overflow"),
    ('sum([1, "a"])', call("sum", inp("bad")), "argument 1 of `sum` must be a List of Int or Float, found a string at index 1"),
    ("sum([true])", call("sum", inp("bools")), "argument 1 of `sum` must be a List of Int or Float, found a boolean at index 0"),
    ("sum([null])", call("sum", [None]), "argument 1 of `sum` must be a List of Int or Float, found null at index 0"),
    ('sum("x")', call("sum", "x"), "argument 1 of `sum` must be a List of Int or Float, found a string"),
    ("sum(map)", call("sum", inp("labels")), "argument 1 of `sum` must be a List of Int or Float, found an object"),
    ("an error in one element fails map", call("map", inp("zero_one"), lam("v", b("div", 10, var("v")))), "division by zero"),
    ("an error fails filter", call("filter", [0], lam("v", b("gt", b("div", 1, var("v")), 0))), "division by zero"),
    ("an error in the list argument", call("any", b("div", 1, 0), lam("v", True)), "division by zero"),
    ('map("s", ...)', call("map", inp("s"), lam("v", 1)), "argument 1 of `map` must be a List, found a string"),
    ("filter(map, ...)", call("filter", inp("labels"), lam("v", True)), "argument 1 of `filter` must be a List, found an object"),
    ("find(1, ...)", call("find", 1, lam("v", True)), "argument 1 of `find` must be a List, found an integer"),
    ("any(true, ...)", call("any", True, lam("v", True)), "argument 1 of `any` must be a List, found a boolean"),
    ("all(1.5, ...)", call("all", 1.5, lam("v", True)), "argument 1 of `all` must be a List, found a number"),
    ("filter([1], v => v)", call("filter", [1], lam("v", var("v"))), "the lambda passed to `filter` must return a Bool, found an integer"),
    ('find(["a"], v => v)', call("find", ["a"], lam("v", var("v"))), "the lambda passed to `find` must return a Bool, found a string"),
    ("any([[]], v => v)", call("any", [[]], lam("v", var("v"))), "the lambda passed to `any` must return a Bool, found an array"),
    ("all([{}], v => v)", call("all", [{}], lam("v", var("v"))), "the lambda passed to `all` must return a Bool, found an object"),
    # what the compiler rejects still fails cleanly if an IR file carries it
    ("unknown function", call("nope", 1), "unknown function `nope`"),
    ("len()", call("len"), "`len` takes 1 argument, found 0"),
    ("len(1, 2)", call("len", 1, 2), "`len` takes 1 argument, found 2"),
    ("contains(1)", call("contains", 1), "`contains` takes 2 arguments, found 1"),
    ("min()", call("min"), "`min` takes at least 1 argument, found 0"),
    ("coalesce()", call("coalesce"), "`coalesce` takes at least 1 argument, found 0"),
    ("sum()", call("sum"), "`sum` takes 1 argument, found 0"),
    ("map(list)", call("map", [1]), "`map` takes 2 arguments, found 1"),
    ("map(list, 1)", call("map", [1], 1), "argument 2 of `map` must be a lambda"),
    ("a lambda as a value", lam("v", 1), LAMBDA_OUTSIDE_CALL),
    ("a lambda passed to len", call("len", lam("v", 1)), LAMBDA_OUTSIDE_CALL),
]
# fmt: on


@pytest.mark.parametrize(
    ("expr", "message"), [(r[1], r[2]) for r in ERROR_ROWS], ids=[r[0] for r in ERROR_ROWS]
)
def test_error(expr: Any, message: str) -> None:
    assert error_of(expr, Scope(input={**DATA, "vast": 10**400})) == message


def test_the_totals_example_of_chapter_21() -> None:
    lines: list[JsonValue] = [
        {"sku": "A", "quantity": 12, "unit_price": 2.5},
        {"sku": "B", "quantity": 1, "unit_price": 0.0},
    ]
    scope = Scope(input={"lines": lines})
    totals = run(
        {
            "count": call("len", inp("lines")),
            "units": call("sum", call("map", inp("lines"), lam("l", var("l", "quantity")))),
            "subtotal": call(
                "sum",
                call(
                    "map",
                    inp("lines"),
                    lam("l", b("mul", call("float", var("l", "quantity")), var("l", "unit_price"))),
                ),
                float_sum=True,
            ),
            "bulk": call("filter", inp("lines"), lam("l", b("ge", var("l", "quantity"), 10))),
            "first_free": call(
                "find", inp("lines"), lam("l", b("eq", var("l", "unit_price"), 0.0))
            ),
            "all_in_stock": call("all", inp("lines"), lam("l", b("gt", var("l", "quantity"), 0))),
        },
        scope,
    )
    assert same(totals["units"], 13)
    assert same(totals["subtotal"], 30.0)
    assert totals["bulk"] == [lines[0]]
    assert totals["first_free"] == lines[1]
    assert totals["all_in_stock"] is True
    per_unit = b(
        "div",
        e.Get(e.StepRef("totals"), "subtotal"),
        call("float", e.Get(e.StepRef("totals"), "units")),
    )
    assert run(per_unit, Scope(steps={"totals": totals})) == 2.3076923076923075


def test_the_discount_example_of_chapter_21_fails_with_division_by_zero() -> None:
    expr = b(
        "mul",
        inp("subtotal"),
        call("float", b("div", 100, b("sub", 100, inp("discount_percent")))),
    )
    scope = Scope(input={"subtotal": 10.0, "discount_percent": 100})
    assert error_of(expr, scope) == "division by zero"
    assert run(expr, Scope(input={"subtotal": 10.0, "discount_percent": 50})) == 20.0


def test_the_notify_example_of_chapter_27() -> None:
    users: list[JsonValue] = [
        {"email": "a@x", "active": True},
        {"email": "b@x", "active": False},
    ]
    active = lam("u", var("u", "active"))
    when = call("any", inp("users"), active)
    with_ = {"to": call("map", call("filter", inp("users"), active), lam("u", var("u", "email")))}
    scope = Scope(input={"users": users})
    assert run(when, scope) is True
    assert run(with_, scope) == {"to": ["a@x"]}
