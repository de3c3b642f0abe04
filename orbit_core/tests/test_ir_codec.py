import json

import pytest

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
    step = to_json(hello())["steps"][1]
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
def test_malformed_documents_are_rejected_with_a_path(patch: dict, message: str) -> None:
    document = {**to_json(hello()), **patch}
    with pytest.raises(IRError) as info:
        from_json(document)
    assert message in str(info.value)


@pytest.mark.parametrize("document", [None, [], "x", 3, {"ir_version": "orbit-ir/1"}])
def test_garbage_is_an_ir_error(document: object) -> None:
    with pytest.raises(IRError):
        from_json(document)
