"""Operators, member access, indexing and `if` (chapter 26, inventory §18 and §25).

Each row is `(expression, expected)`; values read through `input` arrive as
JSON, which is how operand types the compiler cannot see reach the runtime.
"""

from __future__ import annotations

from typing import Any

import pytest
from evalkit import INT_MAX, INT_MIN, b, error_of, idx, if_, inp, path, run, same, step, u, var, x

from orbit_core.evaluate import Scope
from orbit_core.ir import expr as e

DATA: dict[str, Any] = {
    "price": 5,  # a Float field holding a whole number arrives as an integer
    "price_f": 5.0,
    "n": 1,
    "s": "a",
    "t": True,
    "nothing": None,
    "big": 1e200,
    "max": INT_MAX,
    "min": INT_MIN,
    "list": [10, 20, 30],
    "labels": {"accept": "json", "content-type": "text/plain"},
    "items": [{"sku": "A-1", "price": 10.0}],
    "ab": {"a": 1, "b": [1, 2]},
    "ba": {"b": [1.0, 2], "a": 1.0},
    "huge": 2**70,  # JSON can carry integers beyond 64 bits
    "vast": 10**400,  # ... and beyond what a float can hold
}
SCOPE = Scope(
    input=DATA,
    execution={"id": "order-1", "workflow": "Orders", "version": "1.2.0"},
    steps={"charge": {"transaction_id": "tx-9", "amount": 12.5}, "skipped": None},
    vars={"item": {"sku": "B-2", "qty": 3}},
    failure={"code": "CARD_DECLINED", "message": "no funds", "step": "charge"},
    event={"place": "Lyon", "eta_hours": 2},
)

# fmt: off
VALUE_ROWS: list[tuple[str, Any, Any]] = [
    # precedence examples from the book, already grouped by the parser
    ("1 + 2 * 3 == 7 && !false", b("and", b("eq", b("add", 1, b("mul", 2, 3)), 7), u("not", False)), True),
    ("10 - 3 - 2", b("sub", b("sub", 10, 3), 2), 5),
    # integer arithmetic
    ("7 / 2", b("div", 7, 2), 3),
    ("-7 / 2", b("div", -7, 2), -3),
    ("7 / -2", b("div", 7, -2), -3),
    ("-7 / -2", b("div", -7, -2), 3),
    ("-7 % 3", b("mod", -7, 3), -1),
    ("7 % -3", b("mod", 7, -3), 1),
    ("-7 % -3", b("mod", -7, -3), -1),
    ("7 % 3", b("mod", 7, 3), 1),
    ("6 / 3", b("div", 6, 3), 2),
    ("max + 0", b("add", INT_MAX, 0), INT_MAX),
    ("min / 1", b("div", inp("min"), 1), INT_MIN),
    ("min % -1", b("mod", inp("min"), -1), 0),
    ("-max - 1", b("sub", -INT_MAX, 1), INT_MIN),
    # float arithmetic and mixing
    ("7.0 / 2", b("div", 7.0, 2), 3.5),
    ("7 / 2.0", b("div", 7, 2.0), 3.5),
    ("1 + 0.5", b("add", 1, 0.5), 1.5),
    ("huge integer + 0.5 is a float", b("add", inp("huge"), 0.5), 2.0**70),
    ("1 + 1.0 is a float", b("add", 1, 1.0), 2.0),
    ("2.5 * 2", b("mul", 2.5, 2), 5.0),
    ("5.5 % 2", b("mod", 5.5, 2), 1.5),
    ("-5.5 % 2", b("mod", -5.5, 2), -1.5),
    ("0.1 + 0.2", b("add", 0.1, 0.2), 0.30000000000000004),
    # the runtime follows the JSON value, not the declared type
    ("input.price / 2 (JSON 5)", b("div", inp("price"), 2), 2),
    ("input.price / 2 (JSON 5.0)", b("div", inp("price_f"), 2), 2.5),
    ("input.price / 2.0", b("div", inp("price"), 2.0), 2.5),
    ("float(input.price) / 2", b("div", e.Call("float", (inp("price"),)), 2), 2.5),
    # a result that is not finite becomes null
    ("1e308 * 10.0", b("mul", 1e308, 10.0), None),
    ("big * big", b("mul", inp("big"), inp("big")), None),
    ("-big * big", b("mul", u("neg", inp("big")), inp("big")), None),
    ("1e308 + 1e308", b("add", 1e308, 1e308), None),
    # concatenation
    ('"order-" + "A"', b("add", "order-", "A"), "order-A"),
    ('[1] + [2, "x"]', b("add", [1], [2, "x"]), [1, 2, "x"]),
    ("[] + []", b("add", [], []), []),
    # comparison
    ('"B" < "a"', b("lt", "B", "a"), True),
    ('"é" > "z"', b("gt", "é", "z"), True),
    ('"a" < "ab"', b("lt", "a", "ab"), True),
    ('"" <= ""', b("le", "", ""), True),
    ("1 < 1.5", b("lt", 1, 1.5), True),
    ("2 >= 2.0", b("ge", 2, 2.0), True),
    ("2.0 <= 2", b("le", 2.0, 2), True),
    ("3 > 2.5", b("gt", 3, 2.5), True),
    ("-1 > -2", b("gt", -1, -2), True),
    ("max > max - 1 (no float rounding)", b("gt", INT_MAX, INT_MAX - 1), True),
    # equality
    ("1 == 1.0", b("eq", 1, 1.0), True),
    ("1 != 1.0", b("ne", 1, 1.0), False),
    ("[1, 2] == [1.0, 2]", b("eq", [1, 2], [1.0, 2]), True),
    ("[1] == [1, 2]", b("eq", [1], [1, 2]), False),
    ("objects compare key by key in any order", b("eq", inp("ab"), inp("ba")), True),
    ("{a: 1} == {a: 1, b: 2}", b("eq", {"a": 1}, {"a": 1, "b": 2}), False),
    ("{a: 1} == {b: 1}", b("eq", {"a": 1}, {"b": 1}), False),
    ("true == 1 through JSON", b("eq", inp("t"), inp("n")), False),
    ("[true] == [1]", b("eq", [True], [1]), False),
    ('"1" == 1 through JSON', b("eq", "1", inp("n")), False),
    ("null == null", b("eq", None, None), True),
    ("missing field == null", b("eq", inp("no_such"), None), True),
    ("charge.transaction_id != null", b("ne", step("charge", "transaction_id"), None), True),
    ("skipped.x != null", b("ne", step("skipped", "x"), None), False),
    ("0 == -0.0", b("eq", 0, -0.0), True),
    ('"a" == "a"', b("eq", "a", "a"), True),
    # logical operators short-circuit
    ("false && (1 / 0 == 0)", b("and", False, b("eq", b("div", 1, 0), 0)), False),
    ("true || (1 / 0 == 0)", b("or", True, b("eq", b("div", 1, 0), 0)), True),
    ("true && false", b("and", True, False), False),
    ("true && true", b("and", True, True), True),
    ("false || false", b("or", False, False), False),
    ("false || true", b("or", False, True), True),
    ("!true", u("not", True), False),
    ("!false", u("not", False), True),
    # unary minus keeps the type
    ("-input.price", u("neg", inp("price")), -5),
    ("-2.5", u("neg", 2.5), -2.5),
    ("-(0.0)", u("neg", 0.0), -0.0),
    ("-min - 1 ... -(min + 1)", u("neg", b("add", INT_MIN, 1)), INT_MAX),
    # if
    ("if true then 1 else 2", if_(True, 1, 2), 1),
    ("if false then 1 else 2", if_(False, 1, 2), 2),
    ("a null condition picks else", if_(inp("nothing"), 1, 2), 2),
    ("only one branch runs", if_(True, "x", b("div", 1, 0)), "x"),
    ("only one branch runs (else)", if_(False, b("div", 1, 0), "y"), "y"),
    ('if c then 1 else 2.5', if_(b("gt", inp("price"), 1), 1, 2.5), 1),
    # literals
    ("object literal keeps key order", {"b": 1, "a": 2, "content-type": "text/plain"}, {"b": 1, "a": 2, "content-type": "text/plain"}),
    ("nested object", {"totals": {"net": inp("price"), "gross": b("mul", inp("price"), 1.2)}}, {"totals": {"net": 5, "gross": 6.0}}),
    ("list literal", [1, "a", None, [True]], [1, "a", None, [True]]),
    ("empty object", {}, {}),
    ("duration 1.5s", e.Duration(1500), 1500),
    ("duration 1d", e.Duration(86_400_000), 86_400_000),
    ("float literal stays float", 2.0, 2.0),
    ("a float literal read back from canonical JSON as 2", e.Float(2), 2.0),
    # references
    ("input", e.Input(), DATA),
    ("execution.id", path(e.Execution(), "id"), "order-1"),
    ("execution.workflow", path(e.Execution(), "workflow"), "Orders"),
    ("execution.version", path(e.Execution(), "version"), "1.2.0"),
    ("a step's whole output", e.StepRef("charge"), {"transaction_id": "tx-9", "amount": 12.5}),
    ("a step field", step("charge", "amount"), 12.5),
    ("a skipped step reads null", e.StepRef("skipped"), None),
    ("a step not yet run reads null", e.StepRef("later"), None),
    ("a field of a missing step is null", step("later", "x", "y"), None),
    ("loop variable field", var("item", "sku"), "B-2"),
    ("failure.code", path(e.Failure(), "code"), "CARD_DECLINED"),
    ("event.place", path(e.Event(), "place"), "Lyon"),
    # member access propagates null and reads map keys
    ("null.b is null", inp("nothing", "b"), None),
    ("a missing field is null", inp("no_such"), None),
    ("headers.accept on a map", inp("labels", "accept"), "json"),
    ("a missing map key is null", inp("labels", "nope"), None),
    ("member access on an object literal", path(x({"a": {"b": 3}}), "a", "b"), 3),
    # indexing
    ("list[0]", idx(inp("list"), 0), 10),
    ("list[2]", idx(inp("list"), 2), 30),
    ("list[-1] is the last", idx(inp("list"), -1), 30),
    ("list[-3]", idx(inp("list"), -3), 10),
    ("list[-4] is out of range", idx(inp("list"), -4), None),
    ("list[3] is out of range", idx(inp("list"), 3), None),
    ("list[huge] is out of range", idx(inp("list"), inp("huge")), None),
    ("[][0]", idx([], 0), None),
    ('map["content-type"]', idx(inp("labels"), "content-type"), "text/plain"),
    ('map["missing"]', idx(inp("labels"), "missing"), None),
    ('record["sku"]', idx(var("item"), "sku"), "B-2"),
    ("null[0] is null", idx(inp("nothing"), 0), None),
    ('null["a"] is null', idx(inp("nothing"), "a"), None),
    ("input.items[0].sku", path(idx(inp("items"), 0), "sku"), "A-1"),
    ("input.items[5].sku is null", path(idx(inp("items"), 5), "sku"), None),
    ("index with an expression", idx(inp("list"), b("sub", inp("n"), 2)), 30),
]
# fmt: on


@pytest.mark.parametrize(
    ("expr", "expected"), [(r[1], r[2]) for r in VALUE_ROWS], ids=[r[0] for r in VALUE_ROWS]
)
def test_value(expr: Any, expected: Any) -> None:
    assert same(run(expr, SCOPE), expected)


# fmt: off
ERROR_ROWS: list[tuple[str, Any, str]] = [
    ("1 / 0", b("div", 1, 0), "division by zero"),
    ("1.0 / 0", b("div", 1.0, 0), "division by zero"),
    ("1 / 0.0", b("div", 1, 0.0), "division by zero"),
    ("1.0 / -0.0", b("div", 1.0, -0.0), "division by zero"),
    ("5 % 0", b("mod", 5, 0), "division by zero"),
    ("1.5 % 0.0", b("mod", 1.5, 0.0), "division by zero"),
    ("100 / (100 - input.price * 20)", b("div", 100, b("sub", 100, b("mul", inp("price"), 20))), "division by zero"),
    ("max + 1", b("add", INT_MAX, 1), "integer overflow"),
    ("min - 1", b("sub", inp("min"), 1), "integer overflow"),
    ("max * 2", b("mul", INT_MAX, 2), "integer overflow"),
    ("min / -1", b("div", inp("min"), -1), "integer overflow"),
    ("-min", u("neg", inp("min")), "integer overflow"),
    ("vast integer + 0.5", b("add", inp("vast"), 0.5), "integer overflow"),
    ("vast integer / 2.0", b("div", inp("vast"), 2.0), "integer overflow"),
    ("huge integer + 0", b("add", inp("huge"), 0), "integer overflow"),
    ("huge integer * 2**200-ish", b("mul", inp("huge"), inp("huge")), "integer overflow"),
    ("true && (1 / 0 == 0)", b("and", True, b("eq", b("div", 1, 0), 0)), "division by zero"),
    ('"a" + 1', b("add", "a", 1), "operator `+` cannot be applied to a string and an integer"),
    ('1 + "a"', b("add", 1, inp("s")), "operator `+` cannot be applied to an integer and a string"),
    ("null + 1", b("add", inp("nothing"), 1), "operator `+` cannot be applied to null and an integer"),
    ("true + 1", b("add", inp("t"), 1), "operator `+` cannot be applied to a boolean and an integer"),
    ("[1] + 1", b("add", [1], 1), "operator `+` cannot be applied to an array and an integer"),
    ("{} + {}", b("add", {}, {}), "operator `+` cannot be applied to an object and an object"),
    ('"a" - "b"', b("sub", "a", "b"), "operator `-` cannot be applied to a string and a string"),
    ("[1] * 2", b("mul", [1], 2), "operator `*` cannot be applied to an array and an integer"),
    ("true / 1", b("div", True, 1), "operator `/` cannot be applied to a boolean and an integer"),
    ('"x" % 2', b("mod", "x", 2), "operator `%` cannot be applied to a string and an integer"),
    ('1 < "a"', b("lt", 1, inp("s")), "operator `<` cannot be applied to an integer and a string"),
    ("null < 1", b("lt", inp("nothing"), 1), "operator `<` cannot be applied to null and an integer"),
    ("true <= false", b("le", True, False), "operator `<=` cannot be applied to a boolean and a boolean"),
    ("[1] > [0]", b("gt", [1], [0]), "operator `>` cannot be applied to an array and an array"),
    ("{} >= {}", b("ge", {}, {}), "operator `>=` cannot be applied to an object and an object"),
    ("1 && true", b("and", inp("n"), True), "operator `&&` cannot be applied to an integer"),
    ("true && 1", b("and", True, inp("n")), "operator `&&` cannot be applied to a boolean and an integer"),
    ("null && true", b("and", inp("nothing"), True), "operator `&&` cannot be applied to null"),
    ('"a" || true', b("or", inp("s"), True), "operator `||` cannot be applied to a string"),
    ("false || null", b("or", False, inp("nothing")), "operator `||` cannot be applied to a boolean and null"),
    ("!1", u("not", inp("n")), "operator `!` cannot be applied to an integer"),
    ("!null", u("not", inp("nothing")), "operator `!` cannot be applied to null"),
    ('-"a"', u("neg", inp("s")), "operator `-` cannot be applied to a string"),
    ("-null", u("neg", inp("nothing")), "operator `-` cannot be applied to null"),
    ("-true", u("neg", True), "operator `-` cannot be applied to a boolean"),
    ("if 1 then ...", if_(inp("n"), 1, 2), "`if` condition must be `Bool`, found an integer"),
    ('if "a" then ...', if_(inp("s"), 1, 2), "`if` condition must be `Bool`, found a string"),
    ("list.sku", inp("items", "sku"), "cannot read field `sku` of an array"),
    ("5.b", inp("price", "b"), "cannot read field `b` of an integer"),
    ('"a".b', inp("s", "b"), "cannot read field `b` of a string"),
    ('list["a"]', idx(inp("list"), "a"), "cannot index an array with a string"),
    ("list[1.0]", idx(inp("list"), 1.0), "cannot index an array with a number"),
    ("list[null]", idx(inp("list"), None), "cannot index an array with null"),
    ("list[true]", idx(inp("list"), True), "cannot index an array with a boolean"),
    ("map[0]", idx(inp("labels"), 0), "cannot index an object with an integer"),
    ('"abc"[0]', idx("abc", 0), "cannot index a string"),
    ("5[0]", idx(5, 0), "cannot index an integer"),
    ("an error in an object literal entry", {"a": 1, "b": b("div", 1, 0)}, "division by zero"),
    ("an error in a list item", [1, b("mod", 1, 0)], "division by zero"),
    ("an error in the index", idx(inp("list"), b("div", 1, 0)), "division by zero"),
    ("an error in the condition", if_(b("lt", 1, "a"), 1, 2), "operator `<` cannot be applied to an integer and a string"),
]
# fmt: on


@pytest.mark.parametrize(
    ("expr", "message"), [(r[1], r[2]) for r in ERROR_ROWS], ids=[r[0] for r in ERROR_ROWS]
)
def test_error(expr: Any, message: str) -> None:
    assert error_of(expr, SCOPE) == message


def test_an_execution_mapping_that_is_not_a_dict_reads_like_one() -> None:
    from types import MappingProxyType

    scope = Scope(execution=MappingProxyType({"id": "e-1"}))
    assert run(path(e.Execution(), "id"), scope) == "e-1"
    assert run(e.Execution(), scope) == {"id": "e-1"}


def test_a_lambda_parameter_reads_from_vars() -> None:
    assert run(e.Var("x"), Scope(vars={"x": [1]})) == [1]


def test_an_unbound_variable_reads_null() -> None:
    assert run(e.Var("nope"), Scope()) is None


def test_results_are_fresh_containers() -> None:
    literal = x({"a": [1]})
    first = run(literal)
    first["a"].append(2)
    assert run(literal) == {"a": [1]}
