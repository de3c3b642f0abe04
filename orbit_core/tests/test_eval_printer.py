"""Printing expressions back as ORBIT source."""

from __future__ import annotations

from typing import Any

import pytest
from evalkit import INT_MIN, b, call, idx, if_, inp, lam, path, step, u, var, x

from orbit_core.ir import expr as e
from orbit_core.ir.printer import render_expr, render_string

# fmt: off
ROWS: list[tuple[Any, str]] = [
    (x("text"), '"text"'),
    (x('a"b\\c\nd\te\rf\x01g\x7f'), '"a\\"b\\\\c\\nd\\te\\rf\\u{1}g\\u{7F}"'),
    (x("🚀é"), '"🚀é"'),
    (x(42), "42"),
    (x(-7), "-7"),
    (x(INT_MIN), "-9223372036854775807 - 1"),
    (x(3.14), "3.14"),
    (x(2.0), "2.0"),
    (x(-0.5), "-0.5"),
    (x(1e22), "10000000000000000000000.0"),
    (x(1.5e-7), "0.00000015"),
    (x(True), "true"),
    (x(None), "null"),
    (e.Duration(500), "500ms"),
    (e.Duration(1500), "1500ms"),
    (e.Duration(30_000), "30s"),
    (e.Duration(90_000), "90s"),
    (e.Duration(120_000), "2m"),
    (e.Duration(7_200_000), "2h"),
    (e.Duration(86_400_000), "1d"),
    (e.Duration(0), "0ms"),
    (inp("order_id"), "input.order_id"),
    (path(e.Execution(), "id"), "execution.id"),
    (path(e.Failure(), "code"), "failure.code"),
    (path(e.Event(), "place"), "event.place"),
    (step("charge", "transaction_id"), "charge.transaction_id"),
    (var("item", "sku"), "item.sku"),
    (path(inp("headers"), "content-type"), 'input.headers["content-type"]'),
    (path(idx(inp("items"), 0), "sku"), "input.items[0].sku"),
    (idx(inp("items"), -1), "input.items[-1]"),
    ({"id": inp("id"), "content-type": "text/plain", "true": 1}, '{ id: input.id, "content-type": "text/plain", "true": 1 }'),
    ({}, "{}"),
    ([1, "a", []], '[1, "a", []]'),
    (b("and", b("eq", b("add", 1, b("mul", 2, 3)), 7), u("not", False)), "1 + 2 * 3 == 7 && !false"),
    (b("sub", b("sub", 10, 3), 2), "10 - 3 - 2"),
    (b("sub", 10, b("sub", 3, 2)), "10 - (3 - 2)"),
    (b("mul", b("add", 1, 2), 3), "(1 + 2) * 3"),
    (b("or", b("and", True, False), True), "true && false || true"),
    (b("and", b("or", True, False), True), "(true || false) && true"),
    (b("mul", -5, 2), "-5 * 2"),
    (b("sub", 3, -5), "3 - -5"),
    (b("mul", INT_MIN, 2), "(-9223372036854775807 - 1) * 2"),
    (u("neg", b("add", inp("a"), inp("b"))), "-(input.a + input.b)"),
    (u("neg", inp("b")), "-input.b"),
    (u("neg", -5), "-(-5)"),
    (u("not", u("not", True)), "!(!true)"),
    (path(x(-5), "x"), "(-5).x"),
    (if_(b("gt", inp("score"), 0.8), "manual", "auto"), 'if input.score > 0.8 then "manual" else "auto"'),
    (b("add", if_(True, 1, 2), 3), "(if true then 1 else 2) + 3"),
    (b("add", 3, if_(True, 1, 2)), "3 + (if true then 1 else 2)"),
    (call("coalesce", inp("nickname"), inp("name"), "customer"), 'coalesce(input.nickname, input.name, "customer")'),
    (call("map", inp("items"), lam("item", b("mul", var("item", "price"), call("float", var("item", "quantity"))))), "map(input.items, item => item.price * float(item.quantity))"),
    (call("map", inp("a"), lam("x", call("map", inp("b"), lam("y", b("mul", var("x"), var("y")))))), "map(input.a, x => map(input.b, y => x * y))"),
    (call("len"), "len()"),
    (b("add", b("add", "order-", inp("order_id")), b("add", "-", call("string", inp("attempt")))), '"order-" + input.order_id + ("-" + string(input.attempt))'),
]
# fmt: on


@pytest.mark.parametrize(("expr", "text"), ROWS, ids=[r[1] for r in ROWS])
def test_render(expr: Any, text: str) -> None:
    assert render_expr(x(expr)) == text


def test_render_string_escapes_only_what_the_lexer_needs() -> None:
    assert render_string("plain") == '"plain"'
    assert render_string("\u2028") == '"\u2028"'
