"""The filter language (orbit_core.visibility): parsing with located errors,
typing against declared fields, and its meaning on rows (`matches`)."""

from __future__ import annotations

import attrs
import pytest

from orbit_core.ir import Definition, SearchField
from orbit_core.ir import expr as e
from orbit_core.ir.types import BOOL, EMPTY_RECORD, FLOAT, INT, STRING, Primitive
from orbit_core.ports import ExecutionRow
from orbit_core.visibility.check import (
    AllOf,
    AnyOf,
    Condition,
    FieldCatalog,
    NoneOf,
    compile_filter,
)
from orbit_core.visibility.fields import SearchValue, timestamp_ms
from orbit_core.visibility.filter import And, Compare, FilterError, Not, Or, Word, parse_filter
from orbit_core.visibility.query import decode_cursor, encode_position, matches


def _defn(name: str, **fields: object) -> Definition:
    search = tuple(SearchField(n, e.Get(e.Input(), n), t) for n, t in fields.items())  # type: ignore[arg-type]
    return Definition(
        "orbit-ir/2",
        name,
        "1.0.0",
        EMPTY_RECORD,
        EMPTY_RECORD,
        (),
        e.EMPTY_OBJECT,
        {},
        search=search,
    )


CATALOG = FieldCatalog.of(
    [
        _defn("Orders", customer=STRING, amount=FLOAT, vip=BOOL, at=Primitive("timestamp")),
        _defn("Refunds", customer=STRING, amount=INT, code=INT),
        _defn("Other", code=STRING),
    ]
)


def test_precedence_and_lists() -> None:
    tree = parse_filter('a == "x" or b > 1 and not c in [1, 2.5, true, RUNNING]')
    assert tree == Or(
        (
            Compare("a", "==", ("x",), 1, 6),
            And(
                (
                    Compare("b", ">", (1,), 13, 17),
                    Not(Compare("c", "in", (1, 2.5, True, Word("RUNNING")), 27, 33)),
                )
            ),
        )
    )
    assert parse_filter('waiting-for not in ["x"]') == Compare(
        "waiting_for", "not in", ("x",), 1, 21
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "invalid filter: the filter is empty"),
        ("a ==", "invalid filter at column 5: expected a value, found the end of the filter"),
        (
            "a == 1 b",
            "invalid filter at column 8: expected `and`, `or` or the end of the filter, found `b`",
        ),
        ("(a == 1", "invalid filter at column 8: expected `)`, found the end of the filter"),
        ('a == "x', "invalid filter at column 6: unterminated string"),
        (
            "a == 1 && b == 2",
            "invalid filter at column 8: unexpected character `&` (use `and`, `or`, `not`)",
        ),
        ("and == 1", "invalid filter at column 1: expected a field name, found `and`"),
        ("a in 1", "invalid filter at column 6: expected `[`, found `1`"),
        ("a not 1", "invalid filter at column 7: expected `in`, found `1`"),
    ],
)
def test_syntax_errors_are_located(text: str, message: str) -> None:
    with pytest.raises(FilterError) as info:
        parse_filter(text)
    assert info.value.message == message
    assert info.value.code == "INVALID_FILTER"


def test_nesting_is_bounded() -> None:
    with pytest.raises(FilterError, match="nested more than 32 levels"):
        parse_filter("(" * 40 + "a == 1" + ")" * 40)


def test_fields_resolve_to_columns_and_workflows() -> None:
    typed = compile_filter('customer == "c-1" and amount > 500 and status == running', CATALOG)
    assert typed == AllOf(
        (
            Condition("customer", False, "str", "==", ("c-1",), ("Orders", "Refunds")),
            Condition("amount", False, "num", ">", (500.0,), ("Orders", "Refunds")),
            Condition("status", True, "status", "==", ("RUNNING",)),
        )
    )
    assert compile_filter('at >= "2024-05-01"', CATALOG) == Condition(
        "at", False, "num", ">=", (float(timestamp_ms("2024-05-01T00:00:00Z") or 0),), ("Orders",)
    )
    assert compile_filter('vip == true or not started < "2024-01-01"', CATALOG) == AnyOf(
        (
            Condition("vip", False, "num", "==", (1.0,), ("Orders",)),
            NoneOf(Condition("started", True, "started", "<", (1704067200000.0,))),
        )
    )


@pytest.mark.parametrize(
    ("text", "workflow", "message"),
    [
        ("nosuch == 1", None, "at column 1: unknown field `nosuch`: no deployed workflow declares"),
        (
            "code == 1",
            "Orders",
            "workflow `Orders` declares no search field `code` (its search fields: `customer`, `amount`, `vip`, `at`",
        ),
        (
            "code == 1",
            None,
            "field `code` has different types (String in `Other`, Int in `Refunds`); name the workflow",
        ),
        (
            'amount > "x"',
            None,
            'field `amount` is a Float and cannot be compared with "x" (a String)',
        ),
        (
            "customer == c1",
            None,
            'field `customer` is a String, not the word `c1` (a string is quoted: "c1")',
        ),
        ("vip > false", None, "field `vip` is a Bool and compares only with `==`, `!=` or `in`"),
        ("status == DONE", None, "`status` is one of RUNNING, COMPENSATING, COMPLETED"),
        ('at > "yesterday"', None, 'field `at` is a Timestamp and "yesterday" is not one'),
        ("waiting_for >= task", None, "`waiting_for` compares only with `==`, `!=` or `in`"),
        ("waiting_for == lunch", None, "`waiting_for` is one of task, timer, signal, child"),
        ("waiting_for == 3", None, "or a quoted step or signal name, not 3"),
    ],
)
def test_type_errors_name_the_field(text: str, workflow: str | None, message: str) -> None:
    with pytest.raises(FilterError) as info:
        compile_filter(text, CATALOG, workflow)
    assert message in info.value.message


def test_code_of_one_workflow_is_fine_when_it_is_named() -> None:
    assert compile_filter("code == 3", CATALOG, "Refunds") == Condition(
        "code", False, "num", "==", (3.0,), ("Refunds",)
    )


ROW = ExecutionRow("x-1", "Orders", "1.0.0", "h", "RUNNING", 1_000, 2_000, 3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('customer == "c-1" and amount > 500', True),
        ('customer == "c-1" and amount > 700', False),
        ('customer in ["a", "c-1"]', True),
        ('customer not in ["a", "c-1"]', False),
        ("not vip == true", True),  # no value: the comparison is false, its negation true
        ('ended > "1970-01-01"', False),  # running: no end
        ('workflow == "Orders" and version == "1.0.0" and status != COMPLETED', True),
    ],
)
def test_matches(text: str, expected: bool) -> None:
    values = {
        "customer": SearchValue("customer", "c-1", None),
        "amount": SearchValue("amount", None, 600.0),
    }
    assert matches(compile_filter(text, CATALOG), ROW, values) is expected


def test_cursors_round_trip_and_refuse_garbage() -> None:
    assert decode_cursor(encode_position(1_000, "x:1")) == (1_000, "x:1")
    with pytest.raises(FilterError, match="the cursor is not one a previous page gave"):
        decode_cursor("!!")


def test_waiting_for_is_a_containment_test_on_the_waiting_row() -> None:
    workflows = ("Orders", "Other", "Refunds")
    open_ = Condition("status", True, "status", "in", ("COMPENSATING", "RUNNING"))
    assert compile_filter("waiting_for == signal", CATALOG) == AllOf(
        (Condition("@waiting", False, "str", "contains", ("|signal",), workflows), open_)
    )
    assert compile_filter('waiting_for != "approve"', CATALOG, "Orders") == NoneOf(
        AllOf((Condition("@waiting", False, "str", "contains", (":approve|",), ("Orders",)), open_))
    )
    values = {"@waiting": SearchValue("@waiting", "|signal:approve|task|", None)}
    assert matches(compile_filter("waiting_for in [timer, task]", CATALOG), ROW, values)
    assert not matches(compile_filter("waiting_for == timer", CATALOG), ROW, values)
    ended = attrs.evolve(ROW, status="COMPLETED")
    assert not matches(compile_filter("waiting_for == task", CATALOG), ended, values)
