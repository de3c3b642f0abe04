"""Runtime validation and defaults (chapters 08, 09, 11, 20; the book's messages)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from evalkit import same
from hypothesis import given, settings
from hypothesis import strategies as st

from orbit_core.ir import types as t
from orbit_core.ir.types import Field, ListType, MapType, OptionalType, RecordType
from orbit_core.values import (
    ValidationError,
    conform,
    describe_value,
    is_base64,
    is_timestamp,
    is_uuid,
    null_as_empty,
)

TIMESTAMP = t.Primitive("timestamp")
UUID = t.Primitive("uuid")
BYTES = t.Primitive("bytes")
DURATION = t.Primitive("duration")


def rec(*fields: Field, name: str | None = None) -> RecordType:
    return RecordType(fields, name)


def opt(inner: t.Type) -> OptionalType:
    return OptionalType(inner)


LINE_ITEM = rec(
    Field("sku", t.STRING),
    Field("quantity", t.INT, 1),
    Field("note", opt(t.STRING)),
    name="LineItem",
)
ADDRESS = rec(
    Field("line1", t.STRING),
    Field("city", t.STRING),
    Field("country", t.STRING, "US"),
    name="Address",
)
CUSTOMER = rec(
    Field("id", t.STRING),
    Field("shipping", ADDRESS),
    Field("billing", opt(ADDRESS)),
    Field(
        "preferences",
        rec(Field("newsletter", t.BOOL, False), Field("language", t.STRING, "en")),
    ),
    name="Customer",
)
RETRY_OPTIONS = rec(
    Field("max_attempts", t.INT, 3),
    Field("window_ms", t.INT, 60000),
    Field("labels", MapType(t.STRING), {"team": "payments"}),
    Field("tags", ListType(t.STRING), []),
    Field("owner", opt(t.STRING), None),
    name="RetryOptions",
)
ORDER_INPUT = rec(Field("order_id", t.STRING), Field("amount", t.FLOAT))

# ---------------------------------------------------------------- primitives

ACCEPTED: list[tuple[t.Type, Any]] = [
    (t.STRING, ""),
    (t.STRING, "héllo"),
    (t.INT, 0),
    (t.INT, -(2**63)),
    (t.INT, 2**63 - 1),
    (t.FLOAT, 1.5),
    (t.FLOAT, 5),  # an integer stays an integer
    (t.FLOAT, -0.0),
    (t.BOOL, True),
    (t.BOOL, False),
    (DURATION, 0),
    (DURATION, 1500),
    (TIMESTAMP, "2026-01-31T09:00:00Z"),
    (TIMESTAMP, "2026-01-31t09:00:00z"),
    (TIMESTAMP, "2026-01-31 09:00:00.123456+05:30"),
    (TIMESTAMP, "2026-01-31T09:00:00-00:00"),
    (TIMESTAMP, "2024-02-29T23:59:59.9Z"),
    (TIMESTAMP, "2016-12-31T23:59:60Z"),
    (UUID, "123e4567-e89b-12d3-a456-426614174000"),
    (UUID, "123E4567-E89B-12D3-A456-426614174000"),
    (BYTES, ""),
    (BYTES, "aGVsbG8="),
    (BYTES, "aGk="),
    (BYTES, "aGVsbG8hIQ=="),
    (BYTES, "+/+/"),
    (t.JSON, None),
    (t.JSON, {"any": [1, "thing"]}),
    (opt(t.INT), None),
    (opt(t.INT), 3),
    (ListType(t.INT), []),
    (MapType(t.INT), {}),
]


@pytest.mark.parametrize(("type_", "value"), ACCEPTED, ids=[repr(r) for r in ACCEPTED])
def test_accepted_values_come_back_unchanged(type_: t.Type, value: Any) -> None:
    assert same(conform(value, type_), value)


# fmt: off
REJECTED: list[tuple[t.Type, Any, str]] = [
    (t.STRING, 1, "$: expected String, found an integer"),
    (t.STRING, None, "$: expected String, found null"),
    (t.INT, 1.5, "$: expected Int, found a number"),
    (t.INT, 2.0, "$: expected Int, found a number"),
    (t.INT, True, "$: expected Int, found a boolean"),
    (t.INT, "1", "$: expected Int, found a string"),
    (t.INT, 2**63, "$: expected Int, found an integer outside the 64-bit range"),
    (t.FLOAT, "12", "$: expected Float, found a string"),
    (t.FLOAT, False, "$: expected Float, found a boolean"),
    (t.FLOAT, None, "$: expected Float, found null"),
    (t.BOOL, 1, "$: expected Bool, found an integer"),
    (t.BOOL, "true", "$: expected Bool, found a string"),
    (DURATION, -1, "$: expected Duration, found a negative integer"),
    (DURATION, 1.5, "$: expected Duration, found a number"),
    (DURATION, "30s", "$: expected Duration, found a string"),
    (TIMESTAMP, 5, "$: expected Timestamp, found an integer"),
    (TIMESTAMP, "2026-01-31T09:00:00", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "2026-02-30T09:00:00Z", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "2026-01-31T24:00:00Z", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "2026-01-31T09:60:00Z", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "2026-01-31T09:00:61Z", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "2026-01-31T09:00:00+24:00", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "2026-01-31T09:00:00.Z", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "2026-1-31T09:00:00Z", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "2026-01-31_09:00:00Z", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (TIMESTAMP, "２０２６-01-31T09:00:00Z", "$: expected Timestamp, found a string that is not an RFC 3339 timestamp"),
    (UUID, "123e4567e89b12d3a456426614174000", "$: expected UUID, found a string that is not a hyphenated UUID"),
    (UUID, "123e4567-e89b-12d3-a456-42661417400g", "$: expected UUID, found a string that is not a hyphenated UUID"),
    (UUID, "{123e4567-e89b-12d3-a456-426614174000}", "$: expected UUID, found a string that is not a hyphenated UUID"),
    (UUID, 1, "$: expected UUID, found an integer"),
    (BYTES, "aGVsbG8", "$: expected Bytes, found a string that is not padded base64"),
    (BYTES, "aGVsbG9=", "$: expected Bytes, found a string that is not padded base64"),
    (BYTES, "aGVs bG8=", "$: expected Bytes, found a string that is not padded base64"),
    (BYTES, "aGVsbG8=\n", "$: expected Bytes, found a string that is not padded base64"),
    (BYTES, "-_8=", "$: expected Bytes, found a string that is not padded base64"),
    (BYTES, "a===", "$: expected Bytes, found a string that is not padded base64"),
    (BYTES, [1], "$: expected Bytes, found an array"),
    (opt(t.STRING), 5, "$: expected String?, found an integer"),
    (opt(ListType(t.INT)), "x", "$: expected List<Int>?, found a string"),
    (ListType(t.INT), {}, "$: expected List<Int>, found an object"),
    (ListType(t.INT), [1, "a"], "$[1]: expected Int, found a string"),
    (MapType(t.INT), [], "$: expected Map<String, Int>, found an array"),
    (MapType(t.INT), {"a": "x"}, "$.a: expected Int, found a string"),
    (MapType(t.INT), {"content-type": "x"}, '$["content-type"]: expected Int, found a string'),
    (MapType(t.INT), {'a"b': None}, '$["a\\"b"]: expected Int, found null'),
    (MapType(t.INT), {"": 1.5}, '$[""]: expected Int, found a number'),
    (ListType(ListType(t.BOOL)), [[], [True, 0]], "$[1][1]: expected Bool, found an integer"),
    (LINE_ITEM, [], "$: expected LineItem, found an array"),
    (rec(Field("a", t.INT)), "x", "$: expected { a: Int }, found a string"),
    (t.EMPTY_RECORD, None, "$: expected {}, found null"),
]
# fmt: on


@pytest.mark.parametrize(("type_", "value", "message"), REJECTED, ids=[r[2] for r in REJECTED])
def test_rejected_values_name_the_path_and_the_problem(
    type_: t.Type, value: Any, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        conform(value, type_)
    assert str(caught.value) == message
    path, problem = message.split(": ", 1)
    assert (caught.value.path, caught.value.problem) == (path, problem)


# ---------------------------------------------------------------- the book's examples


def test_workflow_input_with_a_string_amount() -> None:
    with pytest.raises(ValidationError, match=r"^\$\.amount: expected Float, found a string$"):
        conform({"order_id": "A-1", "amount": "12"}, ORDER_INPUT, strict=True)


def test_workflow_input_with_an_integer_order_id() -> None:
    with pytest.raises(ValidationError) as caught:
        conform({"order_id": 1, "amount": 5}, ORDER_INPUT, strict=True)
    assert str(caught.value) == "$.order_id: expected String, found an integer"


def test_signal_payload_with_a_string_approved() -> None:
    review = rec(Field("approved", t.BOOL), Field("comment", opt(t.STRING)))
    with pytest.raises(ValidationError) as caught:
        conform({"approved": "yes"}, review)
    assert str(caught.value) == "$.approved: expected Bool, found a string"


def test_worker_output_missing_a_required_field() -> None:
    output = rec(Field("message", t.STRING))
    with pytest.raises(ValidationError) as caught:
        conform({"msg": 1}, output)
    assert str(caught.value) == "$.message: missing required field `message` of type String"


def test_workflow_input_missing_a_required_field() -> None:
    with pytest.raises(ValidationError) as caught:
        conform({}, rec(Field("name", t.STRING)), strict=True)
    assert str(caught.value) == "$.name: missing required field `name` of type String"


def test_worker_output_with_a_wrong_type() -> None:
    with pytest.raises(ValidationError) as caught:
        conform({"message": 1}, rec(Field("message", t.STRING)))
    assert str(caught.value) == "$.message: expected String, found an integer"


def test_missing_field_messages_print_the_declared_type() -> None:
    cases = [
        (Field("items", ListType(LINE_ITEM)), "List<LineItem>"),
        (Field("labels", MapType(t.STRING)), "Map<String, String>"),
        (
            Field("shape", rec(Field("a", t.INT), Field("b", opt(t.STRING)))),
            "{ a: Int, b: String? }",
        ),
        (Field("when", TIMESTAMP), "Timestamp"),
        (Field("id", UUID), "UUID"),
    ]
    for field, shown in cases:
        with pytest.raises(ValidationError) as caught:
            conform({}, rec(field))
        assert caught.value.problem == f"missing required field `{field.name}` of type {shown}"


# ---------------------------------------------------------------- defaults


def test_schema_defaults_of_chapter_09() -> None:
    assert same(
        conform({}, RETRY_OPTIONS),
        {
            "max_attempts": 3,
            "window_ms": 60000,
            "labels": {"team": "payments"},
            "tags": [],
            "owner": None,
        },
    )


def test_a_line_item_gets_its_quantity_and_its_optional_note_stays_absent() -> None:
    assert same(conform({"sku": "A"}, LINE_ITEM), {"sku": "A", "quantity": 1})


def test_given_values_win_over_defaults() -> None:
    assert same(conform({"sku": "A", "quantity": 5}, LINE_ITEM), {"sku": "A", "quantity": 5})


def test_nested_schema_defaults_apply() -> None:
    value = {"id": "c-1", "shipping": {"line1": "1 Main", "city": "Oslo"}, "preferences": {}}
    assert same(
        conform(value, CUSTOMER),
        {
            "id": "c-1",
            "shipping": {"line1": "1 Main", "city": "Oslo", "country": "US"},
            "preferences": {"newsletter": False, "language": "en"},
        },
    )


def test_defaults_apply_inside_optional_records_lists_and_maps() -> None:
    order = rec(
        Field("items", ListType(LINE_ITEM)),
        Field("by_sku", MapType(LINE_ITEM)),
        Field("billing", opt(ADDRESS)),
    )
    value = {
        "items": [{"sku": "A"}, {"sku": "B", "quantity": 2}],
        "by_sku": {"A": {"sku": "A"}},
        "billing": {"line1": "x", "city": "y"},
    }
    assert same(
        conform(value, order),
        {
            "items": [{"sku": "A", "quantity": 1}, {"sku": "B", "quantity": 2}],
            "by_sku": {"A": {"sku": "A", "quantity": 1}},
            "billing": {"line1": "x", "city": "y", "country": "US"},
        },
    )


def test_a_defaulted_record_field_gets_its_own_nested_defaults() -> None:
    settings_type = rec(
        Field(
            "prefs",
            rec(Field("newsletter", t.BOOL, False), Field("lang", t.STRING)),
            {"lang": "en"},
        )
    )
    assert same(conform({}, settings_type), {"prefs": {"lang": "en", "newsletter": False}})


def test_an_optional_field_with_a_default_keeps_an_explicit_null() -> None:
    retries = rec(Field("retries", opt(t.INT), 3))
    assert same(conform({}, retries), {"retries": 3})
    assert same(conform({"retries": None}, retries), {"retries": None})


def test_a_required_field_with_a_default_rejects_an_explicit_null() -> None:
    with pytest.raises(ValidationError) as caught:
        conform({"sku": "A", "quantity": None}, LINE_ITEM)
    assert str(caught.value) == "$.quantity: expected Int, found null"


def test_float_defaults_stored_as_integers_come_out_as_floats() -> None:
    # canonical JSON writes 0.0 as 0, so the IR may hand the default back as an int
    type_ = rec(
        Field("rate", t.FLOAT, 0),
        Field("maybe", opt(t.FLOAT), 2),
        Field("weights", ListType(t.FLOAT), [1, 2.5]),
        Field("by_name", MapType(t.FLOAT), {"a": 1}),
        Field("limits", rec(Field("max", t.FLOAT), Field("count", t.INT)), {"max": 10, "count": 3}),
        Field("any", t.JSON, 1),
        Field("count", t.INT, 4),
    )
    assert same(
        conform({}, type_),
        {
            "rate": 0.0,
            "maybe": 2.0,
            "weights": [1.0, 2.5],
            "by_name": {"a": 1.0},
            "limits": {"max": 10.0, "count": 3},
            "any": 1,
            "count": 4,
        },
    )


def test_given_integers_for_float_fields_stay_integers() -> None:
    assert same(
        conform({"order_id": "A", "amount": 12}, ORDER_INPUT), {"order_id": "A", "amount": 12}
    )


def test_without_defaults_nothing_is_added_and_defaulted_fields_may_be_absent() -> None:
    assert same(conform({"sku": "A"}, LINE_ITEM, defaults=False), {"sku": "A"})
    with pytest.raises(ValidationError, match="missing required field `sku`"):
        conform({}, LINE_ITEM, defaults=False)


def test_a_missing_json_field_is_allowed_because_json_may_be_null() -> None:
    assert conform({}, rec(Field("raw", t.JSON))) == {}


def test_defaults_are_fresh_copies() -> None:
    first: Any = conform({}, RETRY_OPTIONS)  # a JSON value
    first["labels"]["team"] = "changed"
    first["tags"].append("x")
    second: Any = conform({}, RETRY_OPTIONS)
    assert second["labels"] == {"team": "payments"}
    assert second["tags"] == []
    assert RETRY_OPTIONS.field("labels").default == {"team": "payments"}  # type: ignore[union-attr]


def test_the_given_value_is_not_changed() -> None:
    value = {"id": "c-1", "shipping": {"line1": "1", "city": "c"}, "preferences": {}}
    before = copy.deepcopy(value)
    conform(value, CUSTOMER)
    assert value == before


# ---------------------------------------------------------------- unknown fields


def test_lenient_validation_keeps_unknown_fields_in_place() -> None:
    value = {"extra": 1, "sku": "A", "more": {"x": None}}
    assert same(
        conform(value, LINE_ITEM),
        {"extra": 1, "sku": "A", "more": {"x": None}, "quantity": 1},
    )


def test_strict_validation_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError) as caught:
        conform({"order_id": "A", "amount": 1.5, "colour": "red"}, ORDER_INPUT, strict=True)
    assert str(caught.value) == "$.colour: unknown field `colour`"


def test_strict_validation_applies_to_nested_records() -> None:
    with pytest.raises(ValidationError) as caught:
        conform(
            {"id": "c", "shipping": {"line1": "1", "city": "c", "zip": "x"}, "preferences": {}},
            CUSTOMER,
            strict=True,
        )
    assert str(caught.value) == "$.shipping.zip: unknown field `zip`"


def test_strict_validation_accepts_anything_inside_json() -> None:
    type_ = rec(Field("raw", t.JSON))
    assert conform({"raw": {"x": 1}}, type_, strict=True) == {"raw": {"x": 1}}


def test_type_errors_come_before_missing_fields_and_those_before_unknown_ones() -> None:
    type_ = rec(Field("a", t.INT), Field("b", t.INT))
    with pytest.raises(ValidationError, match=r"^\$\.a: expected Int"):
        conform({"zzz": 1, "a": "x"}, type_, strict=True)
    with pytest.raises(ValidationError, match=r"^\$\.b: missing required field"):
        conform({"zzz": 1, "a": 1}, type_, strict=True)


def test_paths_into_lists_of_records() -> None:
    order = rec(Field("items", ListType(LINE_ITEM)))
    with pytest.raises(ValidationError) as caught:
        conform({"items": [{"sku": "A"}, {"sku": 7}]}, order)
    assert str(caught.value) == "$.items[1].sku: expected String, found an integer"
    with pytest.raises(ValidationError) as caught:
        conform({"items": [{"sku": "A"}, {"quantity": 2}]}, order)
    assert str(caught.value) == "$.items[1].sku: missing required field `sku` of type String"


def test_very_deep_values_fail_validation_cleanly() -> None:
    value: Any = []
    for _ in range(5_000):
        value = [value]
    nested: t.Type = t.JSON
    for _ in range(5_000):
        nested = ListType(nested)
    with pytest.raises(ValidationError) as caught:
        conform(value, nested)
    assert str(caught.value) == "$: value nested too deeply"


def test_optional_of_optional_is_optional() -> None:
    assert conform(None, opt(opt(t.INT))) is None
    assert conform(3, opt(opt(t.INT))) == 3
    with pytest.raises(ValidationError, match="found a string"):
        conform("x", opt(opt(t.INT)))


# ---------------------------------------------------------------- helpers


def test_null_as_empty() -> None:
    assert null_as_empty(None) == {}
    assert null_as_empty({"a": 1}) == {"a": 1}
    assert null_as_empty([]) == []


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("x", "a string"),
        (1, "an integer"),
        (1.5, "a number"),
        (True, "a boolean"),
        (None, "null"),
        ([], "an array"),
        ({}, "an object"),
    ],
)
def test_describe_value(value: Any, kind: str) -> None:
    assert describe_value(value) == kind


def test_string_form_predicates() -> None:
    assert is_timestamp("2026-01-31T09:00:00Z")
    assert not is_timestamp("2026-01-31")
    assert is_uuid("123e4567-e89b-12d3-a456-426614174000")
    assert not is_uuid("123e4567-e89b-12d3-a456-4266141740001")
    assert is_base64("aGVsbG8=")
    assert not is_base64("aGVsbG8")


# ---------------------------------------------------------------- generated

primitive_types = st.sampled_from([t.Primitive(kind) for kind in t.PRIMITIVES])
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c-d"]), children, max_size=3)
    ),
    max_leaves=8,
)
types = st.recursive(
    primitive_types,
    lambda children: st.one_of(
        children.map(ListType),
        children.map(MapType),
        children.map(OptionalType),
        st.lists(
            st.tuples(st.sampled_from(["a", "b", "c-d"]), children, st.booleans(), json_values),
            max_size=3,
            unique_by=lambda f: f[0],
        ).map(
            lambda fs: RecordType(
                tuple(Field(n, ty, d if has else t.NO_DEFAULT) for n, ty, has, d in fs)
            )
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(json_values, types, st.booleans(), st.booleans())
def test_conform_raises_nothing_but_validation_error(
    value: Any, type_: t.Type, defaults: bool, strict: bool
) -> None:
    try:
        result = conform(value, type_, defaults=defaults, strict=strict)
    except ValidationError as err:
        assert str(err).startswith("$")
        return
    # a conformed value conforms again, to itself
    assert same(conform(result, type_, defaults=defaults, strict=strict), result)
