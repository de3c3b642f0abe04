"""Integers beyond ±(2^53 - 1), from source to a running execution.

The language's Int is 64 bits, but the definition hash is taken over RFC
8785 canonical JSON, which holds integers exactly only up to 2^53 - 1. The
IR writes larger ones as strings of digits (docs/ir.md, "Integers"); these
tests follow such a program through compile, hash, deploy (in memory and to
a real server) and a run whose compute steps evaluate the literals.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_harness import ServerProcess

from orbit_core import ir
from orbit_core.jsontypes import JsonObject
from orbit_core.testing import simulated_engine
from orbit_lang import compile_source

INT_MIN, INT_MAX = -(2**63), 2**63 - 1

SOURCE = """\
workflow Extremes {
    version "1.0.0"
    input { big: Int = 9223372036854775807, small: List<Int> = [1, -9223372036854775807 - 1] }
    timeout: 200000000d
    step low { compute -9223372036854775807 - 1 }
    step high { compute 9223372036854775807 }
    step long { compute 200000000d }
    step safe { compute 9007199254740991 }
    return { low: low, high: high, long: long, safe: safe, big: input.big, small: input.small }
}
"""
OUTPUT = {
    "low": INT_MIN,
    "high": INT_MAX,
    "long": 17_280_000_000_000_000,
    "safe": 2**53 - 1,
    "big": INT_MAX,
    "small": [1, INT_MIN],
}


def _compiled() -> ir.Definition:
    result = compile_source(SOURCE, "extremes.orbit")
    assert [d.message for d in result.diagnostics] == []
    (definition,) = result.definitions
    return definition


def test_the_ir_writes_integers_beyond_2_53_as_strings_and_hashes_them() -> None:
    definition = _compiled()
    document: Any = ir.to_json(definition)  # JSON, looked into below
    steps = {s["name"]: s["compute"] for s in document["steps"]}
    assert steps["low"] == {
        "op": "sub",
        "left": {"op": "int", "value": "-9223372036854775807"},
        "right": {"op": "int", "value": 1},
    }
    assert steps["high"] == {"op": "int", "value": "9223372036854775807"}
    assert steps["long"] == {"op": "duration", "ms": "17280000000000000"}
    assert steps["safe"] == {"op": "int", "value": 9007199254740991}
    assert document["timeout_ms"] == "17280000000000000"
    fields = {f["name"]: f.get("default") for f in document["input"]["fields"]}
    assert fields == {"big": "9223372036854775807", "small": [1, "-9223372036854775808"]}
    assert ir.hash_document(document) == definition.definition_hash
    assert ir.from_json(document) == definition


def test_an_engine_deploys_and_runs_it_with_the_exact_values() -> None:
    engine = simulated_engine()
    try:
        definition = _compiled()
        assert engine.deploy(ir.to_json(definition))["created"] is True
        engine.start("Extremes", execution_id="x-1")
        state = engine.get("x-1")
        assert state["status"] == "COMPLETED", state
        assert state["output"] == OUTPUT
        given: JsonObject = {"big": INT_MIN, "small": []}
        engine.start("Extremes", input=given, execution_id="x-2")
        assert engine.get("x-2")["output"] == {**OUTPUT, **given}
    finally:
        engine.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db: Path = tmp_path_factory.mktemp("bigint") / "orbit.db"
    with ServerProcess(db) as proc:
        yield proc


def test_a_real_server_deploys_and_runs_it(server: ServerProcess) -> None:
    api = server.http()
    document = ir.to_json(_compiled())
    reply = api.post("/v1/workflows", document)
    assert reply.status == 201, reply
    assert reply.body["definition_hash"] == document["definition_hash"]
    again = api.post("/v1/workflows", document)
    assert (again.status, again.body["created"]) == (200, False), again
    started = api.post("/v1/executions", {"workflow": "Extremes", "execution_id": "big-1"})
    assert started.status == 201, started
    final = api.get("/v1/executions/big-1/wait?timeout_ms=10000").body
    assert final["status"] == "COMPLETED", final
    assert final["output"] == OUTPUT
    # A restart reads the stored document back (recovery) and keeps its hash.
    server.stop()
    server.start()
    api = server.http()
    assert api.get("/v1/executions/big-1").body["output"] == OUTPUT
    again = api.post("/v1/workflows", document)
    assert (again.status, again.body["created"]) == (200, False), again


def test_a_real_server_refuses_a_string_for_an_integer_that_fits(server: ServerProcess) -> None:
    document: Any = ir.to_json(_compiled())  # JSON, changed below
    document["version"] = "2.0.0"
    document["steps"][3]["compute"]["value"] = "9007199254740991"
    reply = server.http().post("/v1/workflows", document)
    assert (reply.status, reply.body["error"]["code"]) == (400, "INVALID_IR"), reply
    assert reply.body["error"]["message"] == (
        "$.steps[3].compute.value: the integer 9007199254740991 must be written as a JSON "
        "number: only integers beyond ±9007199254740991 are written as strings"
    )
