"""Names in a submitted IR document follow the source grammar's identifier
rule (orbit_core/ir/names.py): a document the compiler could not have
written is refused by `from_json` with a path, like any malformed one."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from test_ir_codec import hello

from orbit_core.ir import IRError, from_json, to_json
from orbit_core.ir import expr as e
from orbit_core.ir.codec import expr_to_json
from orbit_core.ir.names import is_identifier

Doc = dict[str, Any]


def _document() -> Doc:
    document: Doc = json.loads(json.dumps(to_json(hello())))
    return document


def _set(path: list[str | int], value: object) -> Callable[[Doc], None]:
    def change(document: Doc) -> None:
        node: Any = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _schema(document: Doc) -> None:
    document["input"]["fields"][0]["type"] = {
        "kind": "record",
        "name": "Line Item",
        "fields": [{"name": "sku", "type": {"kind": "string"}}],
    }


def _signal(document: Doc) -> None:
    document["ir_version"] = "orbit-ir/2"
    document["signals"] = [{"name": "go-now", "payload": {"kind": "record", "fields": []}}]


def _lambda(document: Doc) -> None:
    document["ir_version"] = "orbit-ir/2"
    document["result"] = expr_to_json(e.Call("map", (e.List(()), e.Lambda("x y", e.Var("x y")))))


BAD: list[tuple[str, Callable[[Doc], None], str]] = [
    ("workflow", _set(["name"], "<img src=x onerror=alert(1)>"), "$.name: workflow name"),
    ("empty", _set(["name"], ""), '$.name: workflow name ""'),
    ("digit", _set(["name"], "1Hello"), "$.name: workflow name"),
    ("literal", _set(["name"], "null"), '$.name: workflow name "null"'),
    ("unicode", _set(["name"], "Héllo"), "$.name: workflow name"),
    ("step", _set(["steps", 0, "name"], "com pose"), "$.steps[0].name: step name"),
    ("after", _set(["steps", 1, "depends_on"], ["a;b"]), "$.steps[1].depends_on[0]: step name"),
    ("using", _set(["steps", 0, "using"], "py thon"), "$.steps[0].using: runtime"),
    ("field", _set(["input", "fields", 0, "name"], "na-me"), "$.input.fields[0].name: field"),
    ("schema", _schema, '$.input.fields[0].type.name: schema name "Line Item"'),
    (
        "contract field",
        _set(["contracts", "greeting.compose", "input", "fields", 0, "name"], "true"),
        '$.contracts["greeting.compose"].input.fields[0].name: field name "true"',
    ),
    ("step ref", _set(["result", "entries", 0, "value", "target", "name"], "x.y"), "$.result"),
    ("signal", _signal, '$.signals[0].name: signal name "go-now"'),
    ("lambda", _lambda, '$.result: lambda parameter "x y"'),
]


@pytest.mark.parametrize(("change", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_name_that_is_not_an_identifier_is_refused(
    change: Callable[[Doc], None], message: str
) -> None:
    document = _document()
    change(document)
    with pytest.raises(IRError) as refused:
        from_json(document)
    assert str(refused.value).startswith(message), str(refused.value)
    assert "is not an identifier" in str(refused.value)


def test_strings_the_source_allows_anywhere_stay_allowed() -> None:
    """Task names are string literals in the source, and object keys may be
    strings: neither is an identifier."""
    document = _document()
    document["contracts"]["greeting.compose"]["name"] = "greeting.compose"
    document["result"]["entries"][0]["key"] = "content-type"
    document["output"]["fields"][0]["name"] = "content-type"  # an inferred output type
    assert from_json(document).name == "Hello"


def test_a_long_name_is_shortened_in_the_message() -> None:
    document = _document()
    document["name"] = "<" * 1000
    with pytest.raises(IRError) as refused:
        from_json(document)
    assert len(str(refused.value)) < 200


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a", True), ("_", True), ("A_1", True), ("1a", False), ("", False), ("true", False)],
)
def test_is_identifier(text: str, expected: bool) -> None:
    assert is_identifier(text) is expected
