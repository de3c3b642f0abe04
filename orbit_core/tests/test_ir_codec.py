import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbit_core.ir import (
    Definition,
    IRError,
    Retry,
    Step,
    TaskContract,
    definition_hash,
    from_json,
    needs_ir_v2,
    to_json,
)
from orbit_core.ir import expr as e
from orbit_core.ir import types as t
from orbit_core.ir.codec import expr_to_json
from orbit_core.ir.walk import expr_depth


def hello() -> Definition:
    message = t.RecordType((t.Field("message", t.STRING),))
    return Definition(
        ir_version="orbit-ir/1",
        name="Hello",
        version="1.0.0",
        input=t.RecordType((t.Field("name", t.STRING), t.Field("excitement", t.INT, 3))),
        output=t.RecordType((t.Field("greeting", t.STRING),)),
        steps=(
            Step(
                name="compose",
                kind="task",
                task="greeting.compose",
                using="python",
                with_=e.Object((e.Entry("name", e.Get(e.Input(), "name")),)),
                retry=Retry(attempts=3, backoff="exponential", initial_delay_ms=500),
            ),
            Step(
                name="decorate",
                kind="task",
                task="greeting.decorate",
                depends_on=("compose",),
                using="typescript",
                with_=e.Object(
                    (
                        e.Entry("message", e.Get(e.StepRef("compose"), "message")),
                        e.Entry("excitement", e.Get(e.Input(), "excitement")),
                    )
                ),
                timeout_ms=10_000,
            ),
        ),
        result=e.Object((e.Entry("greeting", e.Get(e.StepRef("decorate"), "message")),)),
        contracts={
            "greeting.compose": TaskContract(
                "greeting.compose", "1.0.0", t.RecordType((t.Field("name", t.STRING),)), message
            ),
            "greeting.decorate": TaskContract(
                "greeting.decorate",
                "1.0.0",
                t.RecordType((t.Field("message", t.STRING), t.Field("excitement", t.INT))),
                message,
            ),
        },
    )


def test_a_definition_survives_a_json_round_trip() -> None:
    defn = hello()
    document = json.loads(json.dumps(to_json(defn)))
    assert from_json(document) == defn


def test_absent_optional_members_are_not_written() -> None:
    steps: Any = to_json(hello())["steps"]  # JSON, navigated by the test
    step = steps[1]
    assert set(step) == {"name", "kind", "task", "depends_on", "with", "using", "timeout_ms"}


def test_the_envelope_always_has_description_and_timeout() -> None:
    document = to_json(hello())
    assert document["description"] is None
    assert document["timeout_ms"] is None
    assert list(document)[:6] == [
        "ir_version",
        "name",
        "version",
        "description",
        "definition_hash",
        "timeout_ms",
    ]


def test_the_hash_of_hello_is_pinned() -> None:
    # An orbit-ir/1 hash must never change across releases: if this fails, the
    # IR encoding changed in a way that breaks every deployed definition.
    assert definition_hash(hello()) == (
        "sha256:7523724ffbe02944d9c0405a2551d469bf24fb6fc939ffcb579e13d94ab65f7c"
    )


def test_source_map_and_hash_do_not_enter_the_hash() -> None:
    import attrs

    moved = attrs.evolve(hello(), source_map={"file": "x.orbit"}, definition_hash="sha256:00")
    assert definition_hash(moved) == definition_hash(hello())


def test_a_semantic_change_changes_the_hash() -> None:
    import attrs

    changed = attrs.evolve(hello(), steps=hello().steps[:1])
    assert definition_hash(changed) != definition_hash(hello())


def test_float_literals_hash_apart_from_int_literals() -> None:
    import attrs

    one_int = attrs.evolve(hello(), result=e.Int(1))
    one_float = attrs.evolve(hello(), result=e.Float(1.0))
    assert definition_hash(one_int) != definition_hash(one_float)
    assert from_json(to_json(one_float)).result == e.Float(1.0)


def test_v2_features_are_detected() -> None:
    import attrs

    assert not needs_ir_v2(hello())
    with_lambda = attrs.evolve(
        hello(),
        result=e.Call("map", (e.List(()), e.Lambda("x", e.Var("x")))),
    )
    assert needs_ir_v2(with_lambda)
    compute = attrs.evolve(hello(), steps=(Step(name="c", kind="compute", compute=e.Int(1)),))
    assert needs_ir_v2(compute)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"ir_version": "orbit-ir/3"}, "unsupported IR version `orbit-ir/3`"),
        ({"name": None}, "$.name: expected a string, found null"),
        ({"steps": [{"name": "x"}]}, "$.steps[0].kind: required field missing"),
        ({"steps": [{"name": "x", "kind": "task", "bogus": 1}]}, "unknown member(s) bogus"),
        ({"result": {"op": "zzz"}}, "$.result.op: unknown expression `zzz`"),
        ({"result": {"op": "get", "target": 3}}, "$.result.target: expected an object"),
        ({"steps": [{"name": "x", "kind": "nap"}]}, "unknown kind `nap`"),
        ({"limits": {"max_fan_out": "x"}}, "$.limits['max_fan_out']: expected an integer"),
    ],
)
def test_malformed_documents_are_rejected_with_a_path(patch: dict[str, Any], message: str) -> None:
    document = {**to_json(hello()), **patch}
    with pytest.raises(IRError) as info:
        from_json(document)
    assert message in str(info.value)


@pytest.mark.parametrize("document", [None, [], "x", 3, {"ir_version": "orbit-ir/1"}])
def test_garbage_is_an_ir_error(document: object) -> None:
    with pytest.raises(IRError):
        from_json(document)


# ---------------------------------------------------------------- integers beyond 2^53
#
# RFC 8785 writes numbers as doubles, so the IR writes an integer beyond
# ±(2^53 - 1) as a string of its digits, and every integer has one form.

SAFE = 2**53 - 1
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def _with_result(x: e.Expr) -> Definition:
    import attrs

    return attrs.evolve(hello(), result=x)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (0, 0),
        (SAFE, SAFE),
        (-SAFE, -SAFE),
        (SAFE + 1, "9007199254740992"),
        (-SAFE - 1, "-9007199254740992"),
        (INT_MAX, "9223372036854775807"),
        (INT_MIN, "-9223372036854775808"),
    ],
)
def test_int_literals_have_one_form_each_and_round_trip(value: int, written: int | str) -> None:
    defn = _with_result(e.Int(value))
    document = to_json(defn)
    assert document["result"] == {"op": "int", "value": written}
    assert from_json(json.loads(json.dumps(document))) == defn
    definition_hash(defn)  # canonical JSON takes it


def test_every_integer_member_takes_the_string_form() -> None:
    import attrs

    big = 2**60
    step = Step(
        name="nap",
        kind="sleep",
        sleep_ms=big,
        timeout_ms=big + 1,
        queue_timeout_ms=big + 2,
        retry=Retry(attempts=2, initial_delay_ms=big + 3, max_delay_ms=big + 4),
    )
    defn = attrs.evolve(
        hello(),
        ir_version="orbit-ir/2",
        steps=(step,),
        result=e.Duration(-big),
        timeout_ms=big + 5,
        limits={"max_payload_bytes": big + 6},
    )
    document: Any = to_json(defn)
    assert document["steps"][0] == {
        "name": "nap",
        "kind": "sleep",
        "sleep_ms": str(big),
        "timeout_ms": str(big + 1),
        "queue_timeout_ms": str(big + 2),
        "retry": {"attempts": 2, "initial_delay_ms": str(big + 3), "max_delay_ms": str(big + 4)},
    }
    assert document["result"] == {"op": "duration", "ms": str(-big)}
    assert (document["timeout_ms"], document["limits"]) == (
        str(big + 5),
        {"max_payload_bytes": str(big + 6)},
    )
    assert from_json(document) == defn
    definition_hash(defn)


def test_defaults_take_the_string_form_where_their_type_says_integer() -> None:
    import attrs

    fields = (
        t.Field("n", t.INT, INT_MAX),
        t.Field("f", t.FLOAT, -(2**60)),
        t.Field("d", t.Primitive("duration"), 2**60),
        t.Field("l", t.ListType(t.INT), [1, INT_MIN]),
        t.Field("m", t.MapType(t.OptionalType(t.INT)), {"a": None, "b": INT_MAX}),
        t.Field("r", t.RecordType((t.Field("x", t.INT),)), {"x": INT_MIN}),
        t.Field("s", t.STRING, "9223372036854775807"),
        t.Field("j", t.JSON, {"n": SAFE, "s": "9223372036854775807"}),
    )
    defn = attrs.evolve(hello(), input=t.RecordType(fields))
    document: Any = to_json(defn)
    assert [f["default"] for f in document["input"]["fields"]] == [
        "9223372036854775807",
        "-1152921504606846976",
        "1152921504606846976",
        [1, "-9223372036854775808"],
        {"a": None, "b": "9223372036854775807"},
        {"x": "-9223372036854775808"},
        "9223372036854775807",
        {"n": SAFE, "s": "9223372036854775807"},
    ]
    assert from_json(json.loads(json.dumps(document))) == defn
    definition_hash(defn)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("9007199254740991", "the integer 9007199254740991 must be written as a JSON number"),
        ("-1", "the integer -1 must be written as a JSON number"),
        ("0", "the integer 0 must be written as a JSON number"),
        ("9223372036854775808", "integer out of range"),
        ("-9223372036854775809", "integer out of range"),
        ("9" * 400, "expected an integer, found a string"),
        ("+9007199254740993", "expected an integer, found a string"),
        ("09007199254740993", "expected an integer, found a string"),
        ("-0", "the integer 0 must be written as a JSON number"),
        (" 9007199254740993", "expected an integer, found a string"),
        ("9007199254740993.0", "expected an integer, found a string"),
        ("9_007_199_254_740_993", "expected an integer, found a string"),
        ("٩٠٠٧١٩٩٢٥٤٧٤٠٩٩٣", "expected an integer, found a string"),
        ("1e20", "expected an integer, found a string"),
    ],
)
def test_non_canonical_integer_strings_are_refused(text: str, problem: str) -> None:
    places = [
        ("result", {"op": "int", "value": text}, "$.result.value"),
        ("result", {"op": "duration", "ms": text}, "$.result.ms"),
        ("timeout_ms", text, "$.timeout_ms"),
    ]
    for member, value, path in places:
        with pytest.raises(IRError) as refused:
            from_json({**to_json(hello()), member: value})
        assert str(refused.value).startswith(f"{path}: {problem}"), str(refused.value)
    document: Any = to_json(hello())
    document["input"]["fields"][1]["default"] = text
    with pytest.raises(IRError) as refused:
        from_json(document)
    assert str(refused.value).startswith(f"$.input.fields[1].default: {problem}")


def test_numbers_beyond_2_53_are_refused_as_numbers() -> None:
    for member, value in [("result", {"op": "int", "value": SAFE + 2}), ("timeout_ms", 2**60)]:
        with pytest.raises(IRError, match="canonical JSON holds exactly"):
            from_json({**to_json(hello()), member: value})


def test_a_json_default_keeps_strings_and_refuses_big_numbers() -> None:
    import attrs

    defn = attrs.evolve(hello(), input=t.RecordType((t.Field("j", t.JSON, [SAFE + 2]),)))
    document: Any = to_json(defn)
    # A JSON value cannot tell a string of digits from a number, so the number
    # is written as it is, and refused: the compiler reports it first (E0205).
    assert document["input"]["fields"][0]["default"] == [SAFE + 2]
    with pytest.raises(IRError, match=r"\$\.input\.fields\[0\]\.default\[0\]: an integer outside"):
        from_json(document)


def test_an_integer_beyond_64_bits_has_no_form() -> None:
    with pytest.raises(
        IRError, match="the integer 9223372036854775808 is outside the 64-bit range"
    ):
        to_json(_with_result(e.Int(INT_MAX + 1)))


# ---------------------------------------------------------------- depth


def _json_depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_json_depth(v) for v in value), default=0)
    return 0


def _exprs() -> st.SearchStrategy[e.Expr]:
    simple: list[e.Expr] = [e.Int(1), e.Null(), e.Input(), e.StepRef("a"), e.Var("x")]
    leaves = st.sampled_from(simple)

    def extend(inner: st.SearchStrategy[e.Expr]) -> st.SearchStrategy[e.Expr]:
        return st.one_of(
            st.builds(e.Get, inner, st.just("f")),
            st.builds(e.Index, inner, inner),
            st.builds(e.Lambda, st.just("x"), inner),
            st.builds(e.Unary, st.just("not"), inner),
            st.builds(e.Binary, st.just("add"), inner, inner),
            st.builds(e.If, inner, inner, inner),
            st.builds(lambda xs: e.Call("f", tuple(xs)), st.lists(inner, max_size=3)),
            st.builds(lambda xs: e.List(tuple(xs)), st.lists(inner, max_size=3)),
            st.builds(
                lambda xs: e.Object(tuple(e.Entry(f"k{i}", x) for i, x in enumerate(xs))),
                st.lists(inner, max_size=3),
            ),
        )

    return st.recursive(leaves, extend, max_leaves=30)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(_exprs())
def test_expr_depth_is_the_depth_of_the_encoding(x: e.Expr) -> None:
    assert expr_depth(x) == _json_depth(expr_to_json(x))
