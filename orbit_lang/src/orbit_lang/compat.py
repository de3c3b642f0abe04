"""Version compatibility of compiled workflows and task contracts (`orbit compat`).

Two compiled versions are compared as data: `Side` holds the definitions and
the task contracts of one version, `compare(old, new)` returns the findings.
Nothing here reads source text, so formatting and comments cannot matter.

Types are compared with the checker's own `assignable`, walked field by field
and item by item so that each change gets its own path (`input.lines[].sku`).
Which way a value flows decides the direction: callers send inputs and signal
payloads (old value into the new type), consumers read outputs and query
results (new value into the old type). Two rules are stricter than the
checker: a removed input field is breaking, since the runtime rejects
undeclared input fields, and JSON narrowed to a concrete type (or, on the
reading side, widened to JSON) is breaking, since JSON stands for any value.

A breaking change is an error unless the version bump is major (for 0.x, a
minor bump counts as major); contracts follow their own rules, because
workers are routed by exact `name@version`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal

import attrs

from orbit_core.flow.text import flow_parts
from orbit_core.ir import Definition, TaskContract, definition_hash
from orbit_core.ir.definition import Concurrency, Flow
from orbit_core.ir.types import JSON, Field, ListType, MapType, OptionalType, RecordType, Type
from orbit_lang.check.types import assignable, is_optional, render, strip

Severity = Literal["error", "warning", "ok", "info"]
# Which side of a payload changed: values flow in (input, signal) or out (output, query).
Direction = Literal["in", "out"]

ADDED = "(added)"
REMOVED = "(removed)"


@attrs.frozen
class Side:
    """One version: its workflow definitions and the task contracts it declares or uses."""

    definitions: tuple[Definition, ...]
    contracts: tuple[TaskContract, ...]
    # False for compiled IR, which carries only the contracts its workflows
    # pin: contracts declared but unused are then unknown on that side.
    declares_all: bool = True

    def used(self) -> tuple[TaskContract, ...]:
        return task_contracts(self.definitions)


def comparable_contracts(
    old: Side, new: Side
) -> tuple[tuple[TaskContract, ...], tuple[TaskContract, ...]]:
    """Both sides' contracts; only those the workflows use when either side
    cannot list the contracts it declares, so that mixing source and IR does
    not report every unused contract as added or removed."""
    if old.declares_all and new.declares_all:
        return old.contracts, new.contracts
    return old.used(), new.used()


@attrs.frozen
class Finding:
    severity: Severity
    kind: Literal["workflow", "contract"]
    name: str
    old_version: str | None
    new_version: str | None
    message: str
    path: str | None = None
    old_type: str | None = None
    new_type: str | None = None
    hint: str | None = None

    def subject(self) -> str:
        if self.old_version is None or self.new_version is None:
            return f"{self.name}@{self.old_version or self.new_version}"
        if self.old_version == self.new_version:
            return f"{self.name}@{self.old_version}"
        return f"{self.name} {self.old_version} → {self.new_version}"

    def line(self) -> str:
        """The human line: `<severity> <kind> <subject>: [<path>: <old> → <new>: ]<message>[; hint: ...]`."""
        text = f"{self.severity:<8}{self.kind} {self.subject()}: "
        if self.path is not None:
            text += f"{self.path}: {self.old_type or ADDED} → {self.new_type or REMOVED}: "
        text += self.message
        if self.hint:
            text += f"; hint: {self.hint}"
        return text

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "severity": self.severity,
            "kind": self.kind,
            "name": self.name,
        }
        for key in ("old_version", "new_version", "path", "old_type", "new_type", "message"):
            value = getattr(self, key)
            if value is not None:
                document[key] = value
        if self.hint:
            document["hint"] = self.hint
        return document


@attrs.frozen
class Report:
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity == "warning")

    @property
    def compatible(self) -> bool:
        return self.errors == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "compatible": self.compatible,
            "errors": self.errors,
            "warnings": self.warnings,
            "findings": [f.to_json() for f in self.findings],
        }


@attrs.frozen
class Change:
    """One difference between two payload types, before the version decides its severity."""

    path: str
    old_type: str | None
    new_type: str | None
    message: str
    breaking: bool


# ---------------------------------------------------------------- versions


def parse_version(version: str) -> tuple[int, int, int] | None:
    """MAJOR.MINOR.PATCH with any pre-release or build suffix ignored; None if not semver."""
    core = version.partition("+")[0].partition("-")[0]
    parts = core.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def is_major_bump(old: tuple[int, int, int], new: tuple[int, int, int]) -> bool:
    if new[0] != old[0]:
        return new[0] > old[0]
    return old[0] == 0 and new[1] > old[1]


def next_major(version: tuple[int, int, int]) -> str:
    if version[0] == 0:
        return f"0.{version[1] + 1}.0"
    return f"{version[0] + 1}.0.0"


def major_hint(old: str) -> str:
    parsed = parse_version(old)
    if parsed is None:
        return "bump the major version"
    if parsed[0] == 0:
        return (
            f"bump the minor version ({old} → {next_major(parsed)}); "
            "in 0.x versions the minor version is the major version"
        )
    return f"bump the major version ({old} → {next_major(parsed)})"


def _next_version(old: str, changes: list[Change]) -> str:
    parsed = parse_version(old)
    if parsed is None:
        return "bump the version"
    if any(c.breaking for c in changes):
        bumped = next_major(parsed)
    elif changes:
        bumped = f"{parsed[0]}.{parsed[1] + 1}.0"
    else:
        bumped = f"{parsed[0]}.{parsed[1]}.{parsed[2] + 1}"
    return f"bump the version ({old} → {bumped})"


def _lower(new: str, old: str) -> bool:
    a, b = parse_version(new), parse_version(old)
    return a is not None and b is not None and a < b


# ---------------------------------------------------------------- type changes


def _type(t: Type | None) -> str | None:
    return None if t is None else render(t)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def type_changes(old: Type, new: Type, path: str, direction: Direction) -> Iterator[Change]:
    """The changes from `old` to `new`, one per field or item that differs."""
    if old == new:
        return
    if isinstance(old, OptionalType) and isinstance(new, OptionalType):
        yield from type_changes(old.type, new.type, path, direction)
        return
    if isinstance(old, RecordType) and isinstance(new, RecordType):
        yield from _record_changes(old, new, path, direction)
        return
    if isinstance(old, ListType) and isinstance(new, ListType):
        yield from type_changes(old.items, new.items, f"{path}[]", direction)
        return
    if isinstance(old, MapType) and isinstance(new, MapType):
        yield from type_changes(old.values, new.values, f"{path}{{}}", direction)
        return
    yield _leaf(old, new, path, direction)


def _leaf(old: Type, new: Type, path: str, direction: Direction) -> Change:
    old_text, new_text = render(old), render(new)

    def change(message: str, breaking: bool) -> Change:
        return Change(path, old_text, new_text, message, breaking)

    if direction == "in":
        if new == JSON:
            return change("widened to JSON; every old value is still accepted", False)
        if old == JSON:
            return change(f"incompatible type: expected `{new_text}`, found `JSON`", True)
        problem = assignable(old, new)
        if problem is None:
            if new == OptionalType(old):
                return change("now optional", False)
            return change("widened; every old value is still accepted", False)
        if problem.nullable and not problem.path:
            return change(f"no longer optional: `{render(strip(new))}` is now required", True)
        return change(f"incompatible type: {problem.detail()}", True)
    if new == JSON:
        return change(f"may now be any JSON value but consumers expect `{old_text}`", True)
    if old == JSON:
        return change("narrowed; still accepted where the old type is expected", False)
    problem = assignable(new, old)
    if problem is None:
        if old == OptionalType(new):
            return change("no longer null", False)
        return change("narrowed; still accepted where the old type is expected", False)
    if problem.nullable and not problem.path:
        return change(f"may now be null but consumers expect `{render(strip(old))}`", True)
    return change(f"incompatible type: {problem.detail()}", True)


def _record_changes(
    old: RecordType, new: RecordType, path: str, direction: Direction
) -> Iterator[Change]:
    for before in old.fields:
        where = _join(path, before.name)
        after = new.field(before.name)
        if after is None:
            yield _removed_field(before, where, direction)
            continue
        yield from type_changes(before.type, after.type, where, direction)
        if direction == "in" and before.type == after.type:
            if before.has_default and not after.has_default and not is_optional(after.type):
                yield Change(
                    where, render(before.type), render(after.type), "default removed", True
                )
            elif after.has_default and not before.has_default and not is_optional(before.type):
                yield Change(where, render(before.type), render(after.type), "default added", False)
    for after in new.fields:
        if old.field(after.name) is None:
            yield _added_field(after, _join(path, after.name), direction)


def _added_field(f: Field, path: str, direction: Direction) -> Change:
    if direction == "out":
        return Change(path, None, render(f.type), "field added", False)
    if is_optional(f.type):
        return Change(path, None, render(f.type), "optional field added", False)
    if f.has_default:
        return Change(path, None, render(f.type), "field with a default added", False)
    return Change(path, None, render(f.type), "required field added without a default", True)


def _removed_field(f: Field, path: str, direction: Direction) -> Change:
    if direction == "in":
        message = (
            "field removed; values that still contain it are rejected, "
            "because inputs are validated strictly"
        )
        return Change(path, render(f.type), None, message, True)
    if is_optional(f.type):
        message = "optional field removed; consumers already handle null"
        return Change(path, render(f.type), None, message, False)
    message = "required field removed; consumers that read it no longer find it"
    return Change(path, render(f.type), None, message, True)


# ---------------------------------------------------------------- workflows

_AUDIENCE = {
    "input": "callers",
    "output": "consumers of results",
    "signal": "senders of the signal",
    "query": "readers of the query",
}


def _audience(path: str) -> str:
    return _AUDIENCE[path.split(".", 1)[0].split(" ", 1)[0].split("[", 1)[0]]


def interface_changes(old: Definition, new: Definition) -> list[Change]:
    """Changes to what callers, consumers, signal senders and query readers see."""
    changes = list(type_changes(old.input, new.input, "input", "in"))
    changes += type_changes(old.output, new.output, "output", "out")
    old_signals = {s.name: s for s in old.signals}
    new_signals = {s.name: s for s in new.signals}
    for name in sorted(old_signals):
        signal = old_signals[name]
        if name not in new_signals:
            message = "signal removed: senders get UNKNOWN_SIGNAL"
            changes.append(Change(f"signal {name}", render(signal.payload), None, message, True))
            continue
        changes += type_changes(signal.payload, new_signals[name].payload, f"signal {name}", "in")
    old_queries = {q.name: q for q in old.queries}
    new_queries = {q.name: q for q in new.queries}
    for name in sorted(old_queries):
        query = old_queries[name]
        if name not in new_queries:
            message = "query removed: readers get UNKNOWN_QUERY"
            changes.append(Change(f"query {name}", render(query.type), None, message, True))
            continue
        changes += type_changes(query.type, new_queries[name].type, f"query {name}", "out")
    return changes


def _same_content(old: Definition, new: Definition) -> bool:
    return definition_hash(attrs.evolve(new, version=old.version)) == definition_hash(old)


def _hash(definition: Definition) -> str:
    # Recomputed: the stored hash of a hand-edited IR file may be stale.
    return definition_hash(definition)


def compare_workflows(old: Definition, new: Definition) -> list[Finding]:
    name, before, after = old.name, old.version, new.version

    def finding(
        severity: Severity, message: str, change: Change | None = None, hint: str | None = None
    ) -> Finding:
        if change is None:
            return Finding(severity, "workflow", name, before, after, message, hint=hint)
        return Finding(
            severity, "workflow", name, before, after, message,
            change.path, change.old_type, change.new_type, hint,
        )  # fmt: skip

    changes = interface_changes(old, new)
    if before == after:
        if _hash(old) == _hash(new):
            return [finding("ok", "unchanged")]
        message = (
            "content changed without a version change; "
            "the runtime rejects it with DEFINITION_CONFLICT"
        )
        return [finding("error", message, hint=_next_version(before, changes))]
    findings: list[Finding] = []
    old_v, new_v = parse_version(before), parse_version(after)
    if _lower(after, before):
        findings.append(finding("warning", "the new version is lower than the old one"))
    findings += [finding(severity, message) for severity, message in flow_changes(old, new)]
    if not changes:
        if _same_content(old, new):
            findings.append(finding("info", "new version, definition unchanged"))
        else:
            findings.append(finding("ok", "definition changed; input and output unchanged"))
        return findings
    for change in changes:
        if not change.breaking:
            findings.append(finding("ok", change.message, change))
            continue
        who = _audience(change.path)
        if old_v is None or new_v is None:
            message = (
                f"{change.message}; breaking for {who}, and the version is not "
                "MAJOR.MINOR.PATCH so the bump cannot be checked"
            )
            findings.append(finding("warning", message, change))
        elif is_major_bump(old_v, new_v):
            message = f"{change.message}; breaking for {who}, allowed by the major version bump"
            findings.append(finding("info", message, change))
        else:
            message = f"{change.message}; breaking for {who} without a major version bump"
            findings.append(finding("error", message, change, major_hint(before)))
    return findings


def flow_changes(old: Definition, new: Definition) -> list[tuple[Severity, str]]:
    """How changes to flow-control declarations meet running executions.

    Each execution keeps the definition it started with, flow control
    included, so nothing here breaks a caller or a running execution: the
    declarations decide when work runs, never what it reads or returns.
    They are `info`, except one `warning`: a workflow `concurrency` whose key
    changes (or appears, or goes) while a limit stays. A limit counts every
    version of the workflow by the key each execution computed with its own
    definition, so until the old version's executions end the two versions
    count under different keys and the limit does not hold across them.
    """
    out: list[tuple[Severity, str]] = []
    before = {"workflow": old.flow, **{s.name: s.flow for s in old.steps}}
    after = {"workflow": new.flow, **{s.name: s.flow for s in new.steps}}
    for where in sorted(set(before) | set(after)):
        if where not in after or where not in before:
            continue  # a step added or removed: reported with the steps
        was, now = _by_declaration(before[where]), _by_declaration(after[where])
        subject = "workflow" if where == "workflow" else f"step {where}"
        for name in sorted(set(was) | set(now)):
            b, a = was.get(name), now.get(name)
            if b == a:
                continue
            if a is None:
                out.append(("info", f"{subject}: flow control `{b}` removed"))
            elif b is None:
                out.append(("info", f"{subject}: flow control `{a}` added"))
            else:
                out.append(("info", f"{subject}: flow control `{b}` changed to `{a}`"))
    old_limit, new_limit = _concurrency(old), _concurrency(new)
    if old_limit is not None and new_limit is not None and old_limit.key != new_limit.key:
        out.append(
            (
                "warning",
                "workflow concurrency key changed: executions of the old version count "
                "under their own key until they end, so the limit does not hold across "
                "the two versions meanwhile",
            )
        )
    return out


def _by_declaration(flow: Flow | None) -> dict[str, str]:
    return {part.split(" ")[0].rstrip(":"): part for part in flow_parts(flow)}


def _concurrency(definition: Definition) -> Concurrency | None:
    return definition.flow.concurrency if definition.flow is not None else None


# ---------------------------------------------------------------- contracts


def _contract_changes(old: TaskContract, new: TaskContract) -> list[Change]:
    return [
        *_symmetric_changes(old.input, new.input, "input"),
        *_symmetric_changes(old.output, new.output, "output"),
    ]


def _symmetric_changes(old: Type, new: Type, path: str) -> Iterator[Change]:
    """Changes under one contract version: compatible only both ways."""
    for change in type_changes(old, new, path, "in"):
        if change.old_type is None or change.new_type is None:
            # A field added or removed is harmless both ways only when it may be absent.
            present = change.new_type if change.old_type is None else change.old_type
            harmless = not change.breaking or (present is not None and present.endswith("?"))
            if change.old_type is None:
                message = change.message if change.breaking else "field added"
            else:
                message = "field removed" if harmless else "required field removed"
            yield attrs.evolve(change, message=message, breaking=not harmless)
        else:
            # A retyped field, or a default added or removed: one of the two
            # sides no longer fits the other.
            yield attrs.evolve(change, breaking=True)


def _provider_changes(old: TaskContract, new: TaskContract) -> list[Change]:
    """Can an implementation of `old` serve `new`? It reads the new input and returns the old output."""
    return [
        *type_changes(old.input, new.input, "input", "out"),
        *type_changes(old.output, new.output, "output", "in"),
    ]


def compare_contract_versions(old: TaskContract, new: TaskContract) -> list[Finding]:
    name = old.name
    findings: list[Finding] = []
    if old.version == new.version:
        if old == new:
            return [Finding("ok", "contract", name, old.version, new.version, "unchanged")]
        changes = _contract_changes(old, new)
        for change in changes:
            if change.breaking:
                message = (
                    f"{change.message}; contract shape changed without a version change, so "
                    f"workers announcing {name}@{old.version} no longer match every workflow "
                    "that uses it"
                )
                parsed = parse_version(old.version)
                target = next_major(parsed) if parsed else "a new version"
                hint = f"give the changed contract a new version ({old.version} → {target})"
                findings.append(_contract_finding("error", name, old, new, message, change, hint))
            else:
                message = (
                    f"{change.message}; compatible for old and new workers under the same version"
                )
                findings.append(_contract_finding("ok", name, old, new, message, change))
        if not changes:
            message = "compensated_by changed"
            findings.append(Finding("ok", "contract", name, old.version, new.version, message))
        return findings
    old_v, new_v = parse_version(old.version), parse_version(new.version)
    major = old_v is not None and new_v is not None and is_major_bump(old_v, new_v)
    for change in _provider_changes(old, new):
        if not change.breaking:
            message = (
                f"{change.message}; an implementation of {old.version} also satisfies {new.version}"
            )
            findings.append(_contract_finding("ok", name, old, new, message, change))
        elif major:
            message = (
                f"{change.message}; an implementation of {old.version} cannot serve "
                f"{new.version}: deploy workers for the new version before the workflows "
                "that use it"
            )
            findings.append(_contract_finding("info", name, old, new, message, change))
        else:
            message = (
                f"{change.message}; an implementation of {old.version} cannot serve "
                f"{new.version}, but the version bump is not major"
            )
            findings.append(
                _contract_finding(
                    "warning", name, old, new, message, change, major_hint(old.version)
                )
            )
    return findings


def _contract_finding(  # noqa: PLR0917
    severity: Severity,
    name: str,
    old: TaskContract,
    new: TaskContract,
    message: str,
    change: Change,
    hint: str | None = None,
) -> Finding:
    return Finding(
        severity, "contract", name, old.version, new.version, message,
        change.path, change.old_type, change.new_type, hint,
    )  # fmt: skip


def compare_contracts(old: Iterable[TaskContract], new: Iterable[TaskContract]) -> list[Finding]:
    old_by_name: dict[str, dict[str, TaskContract]] = {}
    new_by_name: dict[str, dict[str, TaskContract]] = {}
    for contract in old:
        old_by_name.setdefault(contract.name, {})[contract.version] = contract
    for contract in new:
        new_by_name.setdefault(contract.name, {})[contract.version] = contract
    findings: list[Finding] = []
    for name in [*sorted(old_by_name), *sorted(n for n in new_by_name if n not in old_by_name)]:
        before = old_by_name.get(name, {})
        after = new_by_name.get(name, {})
        for version in sorted(after, key=_version_key):
            contract = after[version]
            if version in before:
                findings += compare_contract_versions(before[version], contract)
                continue
            lower = [v for v in before if _version_key(v) < _version_key(version)]
            if lower:
                closest = max(lower, key=_version_key)
                findings += compare_contract_versions(before[closest], contract)
            else:
                findings.append(
                    Finding("info", "contract", name, None, version, "contract version added")
                )
        for version in sorted(before, key=_version_key):
            if version not in after:
                message = (
                    "contract version no longer declared or used; "
                    "keep workers for it until executions that use it finish"
                )
                findings.append(Finding("info", "contract", name, version, None, message))
    return findings


def _version_key(version: str) -> tuple[object, ...]:
    from orbit_core.semver import semver_key

    return semver_key(version)


# ---------------------------------------------------------------- both


def compare(old: Side, new: Side, *, workflow: str | None = None) -> Report:
    """Every finding, workflows first (those of the old version by name, then
    the added ones by name), then contracts in the same order."""
    old_defs = {d.name: d for d in old.definitions}
    new_defs = {d.name: d for d in new.definitions}
    findings: list[Finding] = []
    names = [*sorted(old_defs), *sorted(n for n in new_defs if n not in old_defs)]
    for name in names:
        if workflow is not None and name != workflow:
            continue
        before, after = old_defs.get(name), new_defs.get(name)
        if before is not None and after is not None:
            findings += compare_workflows(before, after)
        elif before is not None:
            message = (
                "workflow removed; running executions keep their definition, "
                "but new starts fail once it is no longer registered"
            )
            findings.append(Finding("warning", "workflow", name, before.version, None, message))
        elif after is not None:
            findings.append(
                Finding("info", "workflow", name, None, after.version, "workflow added")
            )
    findings += compare_contracts(*comparable_contracts(old, new))
    return Report(tuple(findings))


def task_contracts(
    definitions: Iterable[Definition], declared: Iterable[TaskContract] = ()
) -> tuple[TaskContract, ...]:
    """The declared task contracts plus those the definitions pin, built-in
    `orbit.*` tasks left out, each `name@version` once."""
    seen: dict[tuple[str, str], TaskContract] = {}
    for contract in declared:
        seen.setdefault((contract.name, contract.version), contract)
    for definition in definitions:
        for pinned in definition.contracts.values():
            if isinstance(pinned, TaskContract):
                seen.setdefault((pinned.name, pinned.version), pinned)
    return tuple(c for key, c in seen.items() if not key[0].startswith("orbit."))
