"""One mistake, one diagnostic: typical slips of a first day, each checked
to produce exactly the diagnostic that names it and nothing that follows
from it (a misspelt field in a `with` record used to add E0403 for the field
it was meant to be)."""

from __future__ import annotations

import pytest

from orbit_lang import compile_source

CONTRACT = """\
task "greeting.compose" {
    version "1.0.0"
    input { name: String, excitement: Int }
    output { message: String }
}
"""

COMPOSE = 'step compose { worker "greeting.compose" with { name: input.name, excitement: 1 } }'


def workflow(*members: str, contract: str = CONTRACT) -> str:
    body = "\n    ".join(members)
    return f'{contract}\nworkflow Hello {{\n    version "1.0.0"\n    input {{ name: String }}\n    {body}\n}}\n'


CASES = {
    "misspelt field in a with record": (
        workflow(
            'step compose { worker "greeting.compose" with { nme: input.name, excitement: 1 } }',
            "return { greeting: compose.message }",
        ),
        ["E0404"],
    ),
    "misspelt field and a missing one": (
        workflow(
            'step compose { worker "greeting.compose" with { nme: input.name } }',
            "return { greeting: compose.message }",
        ),
        ["E0403", "E0404"],
    ),
    "misspelt field in a return record": (
        workflow(
            "output { greeting: String }",
            COMPOSE,
            "return { greting: compose.message }",
        ),
        ["E0404"],
    ),
    "missing field": (
        workflow(
            'step compose { worker "greeting.compose" with { name: input.name } }',
            "return { greeting: compose.message }",
        ),
        ["E0403"],
    ),
    "wrong type for a field": (
        workflow(
            'step compose { worker "greeting.compose" with { name: input.name, excitement: "high" } }',
            "return { greeting: compose.message }",
        ),
        ["E0400"],
    ),
    "unknown task, its output used": (
        workflow(
            'step compose { worker "greeting.compse" with { name: input.name, excitement: 1 } }',
            "return { greeting: compose.message, n: compose.x }",
        ),
        ["E0300"],
    ),
    "misspelt step in after": (
        workflow(
            COMPOSE,
            'step again { worker "greeting.compose" with { name: input.name, excitement: 1 } after compse }',
        ),
        ["E0303"],
    ),
    "misspelt step in a reference": (
        workflow(COMPOSE, "return { greeting: compse.message }"),
        ["E0401"],
    ),
    "misspelt input field": (
        workflow(
            'step compose { worker "greeting.compose" with { name: input.nam, excitement: 1 } }',
        ),
        ["E0402"],
    ),
    "misspelt output field": (
        workflow(COMPOSE, "return { greeting: compose.mesage }"),
        ["E0402"],
    ),
    "unknown signal": (
        workflow("signal go { ok: Bool }", "step hold { await og timeout 1d }"),
        ["E0315"],
    ),
    "contract without the output field used": (
        workflow(
            'step compose { worker "greeting.compose" with { name: input.name } }',
            "return { greeting: compose.message }",
            contract='task "greeting.compose" {\n    version "1.0.0"\n    input { name: String }\n}\n',
        ),
        ["E0402"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_mistake_gives_its_own_diagnostics_only(case: str) -> None:
    source, codes = CASES[case]
    result = compile_source(source, "hello.orbit")
    found = [d.code for d in result.diagnostics if d.severity.name == "ERROR"]
    assert found == codes, [str(d.message) for d in result.diagnostics]


def test_the_misspelt_field_still_suggests_the_right_one() -> None:
    source, _ = CASES["misspelt field in a with record"]
    (diagnostic,) = compile_source(source, "hello.orbit").diagnostics
    assert diagnostic.message == "unknown field `nme` for `{ name: String, excitement: Int }`"
    assert diagnostic.help == "did you mean `name`?"
