"""`orbit compat` (chapter 50): the chapter's transcripts as golden files,
the JSON report, exit codes and bad input, and a generated history of
changes checked against the chapter's rule tables."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from orbit_cli.main import cli
from orbit_core.ir import Definition, Query, Signal
from orbit_core.ir import expr as e
from orbit_core.ir.types import (
    BOOL,
    FLOAT,
    INT,
    JSON,
    STRING,
    Field,
    OptionalType,
    RecordType,
    Type,
)
from orbit_lang import compile_paths
from orbit_lang.compat import Side, compare

# What `st.data().draw` is, as the generators take it.
Draw = Callable[[st.SearchStrategy[Any]], Any]
# The golden fixture of conftest.py: (name, actual text).
Golden = Callable[[str, str], None]
FIXTURES = Path(__file__).parent / "fixtures" / "compat"


@pytest.fixture
def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for path in FIXTURES.iterdir():
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def orbit(*args: str) -> Result:
    return CliRunner(env={"NO_COLOR": "1"}).invoke(cli, ["compat", *args])


TRANSCRIPTS = [
    ("v1", "minor", 1),
    ("v1", "major", 0),
    ("v1", "same", 1),
    ("v1", "compatible", 0),
    ("v1", "output", 1),
    ("r1", "r2", 1),
    ("a1", "a2", 1),
    ("a1", "a3", 0),
    ("b1", "b2", 1),
    ("v1", "renamed", 0),
    ("c1", "c2", 1),
    ("c1", "c3", 0),
]


@pytest.mark.parametrize(("old", "new", "status"), TRANSCRIPTS)
def test_the_chapter_transcripts(
    book: Path, golden: Golden, old: str, new: str, status: int
) -> None:
    result = orbit(f"{old}.orbit", f"{new}.orbit")
    assert result.exit_code == status, result.output
    golden(f"compat_{old}_{new}", result.output)
    # Findings go to stdout, the closing error line to stderr.
    assert "compatibility check failed" not in result.stdout
    assert ("compatibility check failed" in result.stderr) == (status == 1)


def test_the_json_report_is_the_chapters(book: Path) -> None:
    result = orbit("v1.orbit", "minor.orbit", "--format", "json")
    assert result.exit_code == 1
    assert result.stderr == ""
    report = json.loads(result.stdout)
    assert report["compatible"] is False
    assert (report["errors"], report["warnings"]) == (2, 0)
    assert report["findings"][1] == {
        "severity": "error",
        "kind": "workflow",
        "name": "Invoice",
        "old_version": "1.4.0",
        "new_version": "1.5.0",
        "path": "input.currency",
        "new_type": "String",
        "message": "required field added without a default; "
        "breaking for callers without a major version bump",
        "hint": "bump the major version (1.4.0 → 2.0.0)",
    }
    assert "hint" not in report["findings"][2]


def test_compiled_ir_and_source_can_be_mixed(book: Path) -> None:
    result = CliRunner().invoke(cli, ["compile", "v1.orbit", "-o", "deployed"])
    assert result.exit_code == 0, result.output
    mixed = orbit("deployed/v1.orbit.json", "minor.orbit")
    assert mixed.stdout == orbit("v1.orbit", "minor.orbit").stdout
    assert orbit("deployed/v1.orbit.json", "v1.orbit").stdout.startswith(
        "ok      workflow Invoice@1.4.0: unchanged"
    )


def test_a_missing_file_is_a_usage_error(book: Path) -> None:
    result = orbit("v1.orbit", "nowhere.orbit")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: cannot read nowhere.orbit")
    assert result.stdout == ""


def test_a_file_with_compile_errors_exits_2_with_its_diagnostics(book: Path) -> None:
    (book / "broken.orbit").write_text("workflow Broken {\n    version 1\n}\n")
    result = orbit("v1.orbit", "broken.orbit")
    assert result.exit_code == 2
    assert "broken.orbit:2:" in result.stderr
    assert "compilation failed" in result.stderr


@pytest.mark.parametrize(
    ("content", "reason"),
    [("{", "not valid JSON"), ('{"name": 1}', "not a valid IR document")],
)
def test_invalid_ir_is_a_usage_error(book: Path, content: str, reason: str) -> None:
    (book / "bad.json").write_text(content)
    result = orbit("bad.json", "v1.orbit")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: bad.json: " + reason)


def test_a_missing_argument_is_a_usage_error(book: Path) -> None:
    assert orbit("v1.orbit").exit_code == 2


# ---------------------------------------------------------------- a history of changes
#
# A workflow is changed one step at a time, each step being one change of a
# kind chapter 50 lists, under a version that stays, or takes a patch, minor
# or major bump. The rules below are the chapter's tables written out again,
# independently of orbit_lang.compat: whether the change breaks its audience.

PRIMITIVES: list[Type] = [INT, FLOAT, STRING, BOOL]


def _input_change(kind: str, old: Type | None, new: Type | None) -> bool:
    """Is this change to an input (or signal payload) field breaking?"""
    if kind in ("added optional", "added with default", "default added"):
        return False
    if kind in ("added required", "removed", "default removed"):
        return True
    assert old is not None and new is not None
    if new == JSON:
        return False
    if old == JSON:
        return True
    return not (new == OptionalType(old) or (old, new) == (INT, FLOAT))


def _output_change(kind: str, old: Type | None, new: Type | None) -> bool:
    if kind == "added":
        return False
    if kind == "removed":
        # JSON admits null, so a JSON field is optional in the language's sense too.
        return not isinstance(old, OptionalType) and old != JSON
    assert old is not None and new is not None
    if old == JSON:
        return False
    if new == JSON:
        return True
    # Narrowing is safe for readers: T? to T, Float to Int, and Float? to Int.
    inner = old.type if isinstance(old, OptionalType) else old
    return not (new == inner or (inner, new) == (FLOAT, INT))


@attrs.frozen
class Step:
    path: str
    breaking: bool


def _retype(t: Type, draw: Draw) -> Type:
    choices: list[Type] = [p for p in [*PRIMITIVES, JSON] if p != t]
    if isinstance(t, OptionalType):
        choices.append(t.type)
    elif t != JSON:
        choices.append(OptionalType(t))
    chosen: Type = draw(st.sampled_from(choices))
    return chosen


def _change(definition: Definition, draw: Draw, serial: int) -> tuple[Definition, Step]:
    area = draw(st.sampled_from(["input", "output", "signal", "query"]))
    if area == "query":
        return _query_change(definition, draw, serial)
    if area == "signal":
        if definition.signals and draw(st.booleans()):
            signal = definition.signals[0]
            step = Step(f"signal {signal.name}", True)
            return attrs.evolve(definition, signals=definition.signals[1:]), step
        added = Signal(f"s{serial}", RecordType((Field("approved", BOOL),)))
        return attrs.evolve(definition, signals=(*definition.signals, added)), Step("", False)
    record = definition.input if area == "input" else definition.output
    assert isinstance(record, RecordType)
    fields = list(record.fields)
    ops = ["add"] + (["remove", "retype"] if fields else [])
    if area == "input" and fields:
        ops.append("default")
    op = draw(st.sampled_from(ops))
    if op == "add":
        name = f"f{serial}"
        base = draw(st.sampled_from(PRIMITIVES))
        if area == "output":
            kind, new_field = (
                "added",
                Field(name, draw(st.sampled_from([base, OptionalType(base)]))),
            )
        else:
            kind = draw(st.sampled_from(["added optional", "added with default", "added required"]))
            new_field = {
                "added optional": Field(name, OptionalType(base)),
                "added with default": Field(name, STRING, "x"),
                "added required": Field(name, base),
            }[kind]
        fields.append(new_field)
        old_type, new_type = None, new_field.type
    else:
        index = draw(st.integers(0, len(fields) - 1))
        name, old_type = fields[index].name, fields[index].type
        if op == "remove":
            kind, new_type = "removed", None
            del fields[index]
        elif op == "retype":
            kind, new_type = "retyped", _retype(old_type, draw)
            fields[index] = Field(name, new_type)
        else:
            target = fields[index]
            if target.has_default:
                kind, fields[index] = "default removed", Field(name, target.type)
            else:
                # A default needs a value of the field's type: keep it simple.
                kind = "default added" if target.type == STRING else "retyped"
                fields[index] = Field(name, STRING, "x")
            new_type = fields[index].type
    if area == "input":
        breaking = _input_change(kind, old_type, new_type)
        changed = attrs.evolve(definition, input=RecordType(tuple(fields)))
    else:
        breaking = _output_change(kind, old_type, new_type)
        changed = attrs.evolve(definition, output=RecordType(tuple(fields)))
    return changed, Step(f"{area}.{name}", breaking)


def _query_change(definition: Definition, draw: Draw, serial: int) -> tuple[Definition, Step]:
    """A query added (not reported), removed (breaking) or given a new result type
    (judged as an output)."""
    queries = list(definition.queries)
    op = draw(st.sampled_from(["add", "remove", "retype"] if queries else ["add"]))
    if op == "add":
        queries.append(Query(f"q{serial}", e.Bool(True), BOOL))
        return attrs.evolve(definition, queries=tuple(queries)), Step("", False)
    index = draw(st.integers(0, len(queries) - 1))
    query = queries[index]
    if op == "remove":
        del queries[index]
        return attrs.evolve(definition, queries=tuple(queries)), Step(f"query {query.name}", True)
    new_type = _retype(query.type, draw)
    queries[index] = attrs.evolve(query, type=new_type)
    breaking = _output_change("retyped", query.type, new_type)
    return attrs.evolve(definition, queries=tuple(queries)), Step(f"query {query.name}", breaking)


def _bump(version: str, how: str) -> str:
    major, minor, patch = (int(p) for p in version.split("."))
    return {
        "same": version,
        "patch": f"{major}.{minor}.{patch + 1}",
        "minor": f"{major}.{minor + 1}.0",
        "major": f"{major + 1}.0.0",
    }[how]


@pytest.fixture(scope="module")
def base() -> Definition:
    source = Path(__file__).parent / "fixtures" / "compat" / "v1.orbit"
    result = compile_paths([source])
    assert result.ok
    return attrs.evolve(result.definitions[0], version="1.0.0")


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_each_change_in_a_history_is_classified_as_the_tables_say(
    base: Definition, data: st.DataObject
) -> None:
    current = base
    for serial in range(data.draw(st.integers(1, 8))):
        changed, step = _change(current, data.draw, serial)
        how = data.draw(st.sampled_from(["same", "patch", "minor", "major"]))
        changed = attrs.evolve(changed, version=_bump(current.version, how))
        findings = compare(Side((current,), ()), Side((changed,), ())).findings
        if how == "same":
            # Any change under the same version is a DEFINITION_CONFLICT.
            (finding,) = findings
            assert finding.severity == "error"
            assert "DEFINITION_CONFLICT" in finding.message
        elif not step.path:
            # An added signal or query is not reported.
            (finding,) = findings
            assert finding.severity in ("ok", "info")
            assert finding.path is None
        else:
            (finding,) = findings
            assert finding.path == step.path
            expected = ("info" if how == "major" else "error") if step.breaking else "ok"
            assert finding.severity == expected, (finding, step)
        current = changed


def test_a_definition_unchanged_but_for_its_version_is_info(base: Definition) -> None:
    bumped = attrs.evolve(base, version="1.0.1")
    (finding,) = compare(Side((base,), ()), Side((bumped,), ())).findings
    assert finding.severity == "info"


def test_a_lower_version_and_a_non_semver_version_are_warnings(base: Definition) -> None:
    lower = attrs.evolve(base, version="0.9.0")
    findings = compare(Side((base,), ()), Side((lower,), ())).findings
    assert findings[0].severity == "warning"
    odd = attrs.evolve(base, version="next", input=RecordType(()))
    findings = compare(Side((base,), ()), Side((odd,), ())).findings
    assert {f.severity for f in findings} == {"warning"}


def test_pre_release_suffixes_are_ignored_for_the_bump(base: Definition) -> None:
    old = attrs.evolve(base, version="1.0.0-rc.1")
    new = attrs.evolve(base, version="2.0.0-rc.1", input=RecordType(()))
    findings = compare(Side((old,), ()), Side((new,), ())).findings
    assert {f.severity for f in findings} == {"info"}


# ---------------------------------------------------------------- contract rules


def _contract(version: str, inputs: tuple[Field, ...], outputs: tuple[Field, ...]) -> Any:
    from orbit_core.ir import TaskContract

    return TaskContract("payments.charge", version, RecordType(inputs), RecordType(outputs))


AMOUNT = Field("amount", FLOAT)


def test_a_new_major_contract_version_old_workers_cannot_serve_is_info() -> None:
    old = _contract("1.0.0", (AMOUNT,), ())
    new = _contract("2.0.0", (AMOUNT,), (Field("settled_at", STRING),))
    findings = compare(Side((), (old,)), Side((), (new,))).findings
    assert [(f.severity, f.path) for f in findings] == [
        ("info", "output.settled_at"),
        ("info", None),
    ]
    assert "deploy workers for the new version before the workflows" in findings[0].message
    assert findings[1].message.startswith("contract version no longer declared or used")


def test_a_new_contract_version_is_compared_with_the_closest_lower_one() -> None:
    one = _contract("1.0.0", (AMOUNT,), ())
    two = _contract("1.2.0", (AMOUNT, Field("note", STRING)), ())
    new = _contract("1.3.0", (AMOUNT,), ())
    findings = compare(Side((), (one, two)), Side((), (new,))).findings
    # 1.2.0 → 1.3.0 drops an input field an old worker requires.
    assert findings[0].old_version == "1.2.0"
    assert findings[0].severity == "warning"
    assert findings[0].hint == "bump the major version (1.2.0 → 2.0.0)"


def test_same_contract_version_allows_only_optional_fields_to_come_and_go() -> None:
    old = _contract("1.0.0", (AMOUNT, Field("memo", OptionalType(STRING))), ())
    new = _contract("1.0.0", (AMOUNT,), (Field("receipt", OptionalType(STRING)),))
    findings = compare(Side((), (old,)), Side((), (new,))).findings
    assert {f.severity for f in findings} == {"ok"}
    retyped = _contract("1.0.0", (Field("amount", INT),), ())
    (finding,) = compare(Side((), (old,)), Side((), (retyped,))).findings[:1]
    assert finding.severity == "error"
    assert finding.hint == "give the changed contract a new version (1.0.0 → 2.0.0)"


def test_contracts_only_on_one_side_are_info() -> None:
    added = compare(Side((), ()), Side((), (_contract("1.0.0", (), ()),))).findings
    assert [(f.severity, f.line()) for f in added] == [
        ("info", "info    contract payments.charge@1.0.0: contract version added")
    ]
