"""What a process does differently between two compiled versions (`orbit diff`).

The comparison reads IR definitions only: expressions are compared as the
ORBIT source `orbit_core.ir.printer` prints from them, so formatting and
comments are never a change, and dependencies are the definition's
`depends_on` (explicit `after` and those implied by data references).

A workflow's changes come in a fixed order: the workflow's own settings,
input and output fields, the result, signals, queries, the steps added,
removed or renamed, then each step's fields in the order of `STEP_AREAS`
(main steps, then handler and event blocks), the limits and
continue_as_new. Steps pair up by scope and name. Of the leftovers, a step
that vanished and one that appeared within a scope count as a rename if they
execute the same kind of work (`runs`) and no other leftover there does; the
old name is then translated in dependencies before they are compared.

Declared task contracts are compared too (only without --workflow); the
compatibility verdict is `orbit_lang.compat`'s report.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

import attrs

from orbit_core.flow.text import flow_parts
from orbit_core.ir import ChildContract, Definition, Step, TaskContract
from orbit_core.ir import expr as e
from orbit_core.ir.definition import Compensation, Flow, Retry
from orbit_core.ir.printer import render_expr
from orbit_core.ir.types import Field, Primitive, RecordType, Type, render_type
from orbit_lang.compat import Report, Side, comparable_contracts, compare

Kind = Literal["added", "removed", "changed", "renamed"]
SIGILS = {"added": "+", "removed": "-", "changed": "~", "renamed": ">"}


@attrs.frozen
class Change:
    kind: Kind
    area: str
    subject: str
    old: str | None
    new: str | None

    def line(self) -> str:
        sigil = SIGILS[self.kind]
        if self.kind == "added":
            return f"{sigil} {self.area}: {self.subject}: {self.new}"
        if self.kind == "removed":
            return f"{sigil} {self.area}: {self.subject}: {self.old}"
        return f"{sigil} {self.area}: {self.subject}: {self.old} → {self.new}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "area": self.area,
            "subject": self.subject,
            "old": self.old,
            "new": self.new,
        }


@attrs.frozen
class WorkflowDiff:
    name: str
    old_version: str | None
    new_version: str | None
    status: Literal["added", "removed", "changed", "unchanged"]
    changes: tuple[Change, ...]

    def title(self) -> str:
        if self.old_version is None:
            return f"{self.name} {self.new_version} (added)"
        if self.new_version is None:
            return f"{self.name} {self.old_version} (removed)"
        if self.old_version == self.new_version:
            return f"{self.name} {self.old_version}"
        return f"{self.name} {self.old_version} → {self.new_version}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "old_version": self.old_version,
            "new_version": self.new_version,
            "status": self.status,
            "changes": [c.to_json() for c in self.changes],
        }


@attrs.frozen
class ProcessDiff:
    workflows: tuple[WorkflowDiff, ...]
    contracts: tuple[Change, ...]
    compatibility: Report

    @property
    def changes(self) -> list[Change]:
        return [c for w in self.workflows for c in w.changes] + list(self.contracts)

    @property
    def changed(self) -> bool:
        return bool(self.changes) or any(w.status != "unchanged" for w in self.workflows)

    def verdict(self) -> str:
        report = self.compatibility
        if report.errors:
            hints = list(dict.fromkeys(f.hint for f in report.findings if f.severity == "error"))
            shown = "; ".join(h for h in hints if h)
            suffix = f" ({shown})" if shown else ""
            return f"incompatible, {report.errors} error(s){suffix}"
        if report.warnings:
            return f"compatible, {report.warnings} warning(s)"
        return "compatible"

    def summary(self) -> str:
        statuses: list[str] = [w.status for w in self.workflows]
        counts = [
            f"{statuses.count(s)} {s}"
            for s in ("added", "removed", "changed", "unchanged")
            if statuses.count(s)
        ]
        workflows = ", ".join(counts) or "none"
        changes = self.changes
        kinds = [
            f"{sum(1 for c in changes if c.kind == k)} {k}"
            for k in ("added", "removed", "changed", "renamed")
            if any(c.kind == k for c in changes)
        ]
        count = f"{len(changes)} change(s)" + (": " + ", ".join(kinds) if kinds else "")
        return f"workflows: {workflows}; {count}; compatibility: {self.verdict()}"

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "changes": len(self.changes),
            "workflows": [w.to_json() for w in self.workflows],
            "contracts": [c.to_json() for c in self.contracts],
            "compatibility": self.compatibility.to_json(),
        }


# ---------------------------------------------------------------- values


def duration(ms: int) -> str:
    return render_expr(e.Duration(ms))


def expr(x: e.Expr | None) -> str | None:
    return None if x is None else render_expr(x)


def retry_text(retry: Retry | None) -> str:
    if retry is None or (retry.attempts <= 1 and not retry.non_retryable):
        return "none"
    text = (
        f"{retry.attempts} attempts, {retry.backoff} "
        f"{duration(retry.initial_delay_ms)}..{duration(retry.max_delay_ms)}"
    )
    if retry.non_retryable:
        text += ", non-retryable " + ", ".join(retry.non_retryable)
    return text


def field_text(f: Field) -> str:
    text = render_type(f.type)
    if f.has_default:
        import json

        text += " = " + json.dumps(f.default, ensure_ascii=False)
    return text


def action(step: Step, contracts: Mapping[str, TaskContract | ChildContract]) -> str:
    match step.kind:
        case "task":
            contract = contracts.get(step.task or "")
            version = f"@{contract.version}" if contract is not None else ""
            text = f'worker "{step.task}"{version}'
            return text + (f" using {step.using}" if step.using else "")
        case "workflow":
            contract = contracts.get(step.workflow or "")
            version = f"@{contract.version}" if contract is not None else ""
            return f'workflow "{step.workflow}"{version}'
        case "sleep":
            return f"sleep {duration(step.sleep_ms or 0)}"
        case "await":
            return f"await {step.signal}"
        case _:
            return "compute"


def runs(step: Step) -> tuple[str, str | None]:
    """What a step runs, for rename matching (any contract version)."""
    match step.kind:
        case "task":
            return ("task", step.task)
        case "workflow":
            return ("workflow", step.workflow)
        case "await":
            return ("await", step.signal)
        case kind:
            return (kind, None)


def compensation_text(c: Compensation | None) -> str | None:
    if c is None:
        return None
    text = f'worker "{c.task}"'
    if c.with_ is not None:
        text += f" with {render_expr(c.with_)}"
    if c.retry is not None:
        text += f", retry {retry_text(c.retry)}"
    return text


# ---------------------------------------------------------------- comparisons


def _pair(out: list[Change], area: str, subject: str, old: str | None, new: str | None) -> None:
    if old == new:
        return
    if old is None:
        out.append(Change("added", area, subject, None, new))
    elif new is None:
        out.append(Change("removed", area, subject, old, None))
    else:
        out.append(Change("changed", area, subject, old, new))


def type_changes(old: Type, new: Type, path: str, area: str) -> Iterator[Change]:
    """Fields added, removed or retyped (and changed defaults), by path."""
    if old == new:
        return
    if isinstance(old, RecordType) and isinstance(new, RecordType):
        for before in old.fields:
            where = f"{path}.{before.name}"
            after = new.field(before.name)
            if after is None:
                yield Change("removed", area, where, field_text(before), None)
            elif before.type == after.type:
                if field_text(before) != field_text(after):
                    yield Change("changed", area, where, field_text(before), field_text(after))
            elif _nested(before.type, after.type):
                yield from type_changes(before.type, after.type, where, area)
            else:
                yield Change("changed", area, where, field_text(before), field_text(after))
        for after in new.fields:
            if old.field(after.name) is None:
                yield Change("added", area, f"{path}.{after.name}", None, field_text(after))
        return
    from orbit_core.ir.types import ListType, MapType, OptionalType

    if isinstance(old, ListType) and isinstance(new, ListType):
        yield from type_changes(old.items, new.items, f"{path}[]", area)
    elif isinstance(old, MapType) and isinstance(new, MapType):
        yield from type_changes(old.values, new.values, f"{path}{{}}", area)
    elif isinstance(old, OptionalType) and isinstance(new, OptionalType):
        yield from type_changes(old.type, new.type, path, area)
    else:
        yield Change("changed", area, path, render_type(old), render_type(new))


def _nested(old: Type, new: Type) -> bool:
    """Both the same kind of composite type, so the change is shown inside it."""
    return type(old) is type(new) and not isinstance(old, Primitive)


def _rename_map(old: tuple[Step, ...], new: tuple[Step, ...]) -> dict[str, str]:
    old_names = {s.name for s in old}
    new_names = {s.name for s in new}
    gone = [s for s in old if s.name not in new_names]
    fresh = [s for s in new if s.name not in old_names]
    renames: dict[str, str] = {}
    for step in gone:
        key = runs(step)
        olds = [s for s in gone if runs(s) == key]
        news = [s for s in fresh if runs(s) == key]
        if len(olds) == 1 and len(news) == 1:
            renames[step.name] = news[0].name
    return renames


STEP_AREAS = (
    "action",
    "step input",
    "dependency",
    "condition",
    "fan-out",
    "retry",
    "timeout",
    "idempotency",
    "compensation",
)


def _step_changes(  # noqa: PLR0917
    old: Step,
    new: Step,
    subject: str,
    renames: Mapping[str, str],
    old_contracts: Mapping[str, TaskContract | ChildContract],
    new_contracts: Mapping[str, TaskContract | ChildContract],
) -> list[Change]:
    out: list[Change] = []
    _pair(out, "action", subject, action(old, old_contracts), action(new, new_contracts))
    _pair(
        out, "step input", subject, expr(old.with_ or old.compute), expr(new.with_ or new.compute)
    )
    before = {renames.get(d, d) for d in old.depends_on}
    after = set(new.depends_on)
    for name in sorted(after - before):
        out.append(Change("added", "dependency", subject, None, f"after {name}"))
    for name in sorted(before - after):
        out.append(Change("removed", "dependency", subject, f"after {name}", None))
    _pair(out, "condition", subject, _when(old.when), _when(new.when))
    _pair(out, "fan-out", subject, _fan_out(old), _fan_out(new))
    if (old.retry or Retry()) != (new.retry or Retry()):
        out.append(
            Change("changed", "retry", subject, retry_text(old.retry), retry_text(new.retry))
        )
    _pair(out, "timeout", subject, _timeout(old), _timeout(new))
    _pair(out, "timeout", subject, _queue_timeout(old), _queue_timeout(new))
    _pair(out, "idempotency", subject, expr(old.idempotency_key), expr(new.idempotency_key))
    _pair(
        out,
        "compensation",
        subject,
        compensation_text(old.compensate),
        compensation_text(new.compensate),
    )
    _flow(out, subject, old.flow, new.flow)
    return out


def _flow(out: list[Change], subject: str, old: Flow | None, new: Flow | None) -> None:
    """One change per flow-control declaration added, removed or changed."""
    before, after = _by_declaration(old), _by_declaration(new)
    for name in sorted(set(before) | set(after)):
        _pair(out, "flow control", subject, before.get(name), after.get(name))


def _by_declaration(flow: Flow | None) -> dict[str, str]:
    return {part.split(" ")[0].rstrip(":"): part for part in flow_parts(flow)}


def _when(x: e.Expr | None) -> str | None:
    return None if x is None else f"when {render_expr(x)}"


def _timeout(step: Step) -> str | None:
    return None if step.timeout_ms is None else f"timeout {duration(step.timeout_ms)}"


def _queue_timeout(step: Step) -> str | None:
    ms = step.queue_timeout_ms
    return None if ms is None else f"queue_timeout {duration(ms)}"


def _fan_out(step: Step) -> str | None:
    if step.for_each is None:
        return None
    text = f"for {step.for_each.var} in {render_expr(step.for_each.over)}"
    if step.max_parallel is not None:
        text += f", max_parallel {step.max_parallel}"
    return text


def _block(  # noqa: PLR0917
    out: list[Change],
    old: tuple[Step, ...],
    new: tuple[Step, ...],
    prefix: str,
    old_defn: Definition,
    new_defn: Definition,
) -> None:
    """Steps of one scope: added, removed and renamed first, then each step's changes."""
    renames = _rename_map(old, new)
    old_by_name = {s.name: s for s in old}
    new_by_name = {s.name: s for s in new}
    for step in old:
        if step.name in renames:
            out.append(Change("renamed", "step", prefix + step.name, step.name, renames[step.name]))
        elif step.name not in new_by_name:
            out.append(
                Change(
                    "removed", "step", prefix + step.name, action(step, old_defn.contracts), None
                )
            )
    for step in new:
        if step.name not in old_by_name and step.name not in renames.values():
            out.append(
                Change("added", "step", prefix + step.name, None, action(step, new_defn.contracts))
            )
    matched = {renames.get(s.name, s.name): s for s in old}
    for step in new:
        before = matched.get(step.name)
        if before is None or (before.name not in new_by_name and before.name not in renames):
            continue
        out += _step_changes(
            before,
            step,
            prefix + step.name,
            renames,
            old_defn.contracts,
            new_defn.contracts,
        )


def _steps_summary(steps: tuple[Step, ...]) -> str:
    return f"steps {len(steps)} ({', '.join(s.name for s in steps)})"


def _continue_text(defn: Definition) -> str | None:
    c = defn.continue_as_new
    if c is None:
        return None
    return f"{_condition(c.when)} with {render_expr(c.with_)}"


def workflow_changes(old: Definition, new: Definition) -> list[Change]:
    out: list[Change] = []
    _pair(out, "workflow", "version", old.version, new.version)
    _pair(out, "workflow", "description", old.description, new.description)
    _pair(out, "workflow", "timeout", _workflow_timeout(old), _workflow_timeout(new))
    _pair(out, "workflow", "retention", _retention(old), _retention(new))
    out += type_changes(old.input, new.input, "input", "input")
    out += type_changes(old.output, new.output, "output", "output")
    _pair(out, "result", "return", render_expr(old.result), render_expr(new.result))
    _signals(out, old, new)
    _queries(out, old, new)
    _block(out, old.steps, new.steps, "", old, new)
    _handlers(out, old, new)
    _events(out, old, new)
    for key in sorted(set(old.limits) | set(new.limits)):
        b, a = old.limits.get(key), new.limits.get(key)
        _pair(out, "limits", key, None if b is None else str(b), None if a is None else str(a))
    _continue_as_new(out, old, new)
    _flow(out, "workflow", old.flow, new.flow)
    for name in sorted(set(old.contracts) | set(new.contracts)):
        b_child, a_child = old.contracts.get(name), new.contracts.get(name)
        if isinstance(b_child, ChildContract) or isinstance(a_child, ChildContract):
            _pair(out, "contract", name, _child(b_child), _child(a_child))
    return out


def _workflow_timeout(defn: Definition) -> str | None:
    return None if defn.timeout_ms is None else f"timeout {duration(defn.timeout_ms)}"


def _retention(defn: Definition) -> str | None:
    return None if defn.retention_ms is None else f"retention {duration(defn.retention_ms)}"


def _signals(out: list[Change], old: Definition, new: Definition) -> None:
    before = {s.name: s for s in old.signals}
    after = {s.name: s for s in new.signals}
    for name, signal in before.items():
        if name not in after:
            out.append(Change("removed", "signal", name, render_type(signal.payload), None))
        else:
            out += type_changes(signal.payload, after[name].payload, name, "signal")
    for name, signal in after.items():
        if name not in before:
            out.append(Change("added", "signal", name, None, render_type(signal.payload)))


def _queries(out: list[Change], old: Definition, new: Definition) -> None:
    before = {q.name: q for q in old.queries}
    after = {q.name: q for q in new.queries}
    for name, query in before.items():
        changed = after.get(name)
        if changed is None:
            out.append(Change("removed", "query", name, render_expr(query.expr), None))
            continue
        _pair(out, "query", name, render_expr(query.expr), render_expr(changed.expr))
        _pair(out, "query", f"{name}: type", render_type(query.type), render_type(changed.type))
    for name, query in after.items():
        if name not in before:
            out.append(Change("added", "query", name, None, render_expr(query.expr)))


def _handlers(out: list[Change], old: Definition, new: Definition) -> None:
    for kind in ("failure", "cancel", "timeout"):
        before, after = old.handlers.get(kind), new.handlers.get(kind)
        subject = f"on {kind}"
        if before is None and after is not None:
            out.append(Change("added", "handler", subject, None, _steps_summary(after)))
        elif after is None and before is not None:
            out.append(Change("removed", "handler", subject, _steps_summary(before), None))
        elif before is not None and after is not None:
            _block(out, before, after, f"{subject}: ", old, new)


def _events(out: list[Change], old: Definition, new: Definition) -> None:
    before = {h.signal: h for h in old.events}
    after = {h.signal: h for h in new.events}
    for signal in [*before, *(s for s in after if s not in before)]:
        subject = f"on event {signal}"
        b, a = before.get(signal), after.get(signal)
        if b is None and a is not None:
            out.append(Change("added", "event", subject, None, _steps_summary(a.steps)))
        elif a is None and b is not None:
            out.append(Change("removed", "event", subject, _steps_summary(b.steps), None))
        elif b is not None and a is not None:
            _block(out, b.steps, a.steps, f"{subject}: ", old, new)


def _continue_as_new(out: list[Change], old: Definition, new: Definition) -> None:
    before, after = old.continue_as_new, new.continue_as_new
    if before is None or after is None:
        _pair(out, "continue_as_new", "continue_as_new", _continue_text(old), _continue_text(new))
        return
    _pair(out, "continue_as_new", "condition", _condition(before.when), _condition(after.when))
    _pair(out, "continue_as_new", "input", render_expr(before.with_), render_expr(after.with_))


def _condition(when: e.Expr | None) -> str:
    return "always" if when is None else f"when {render_expr(when)}"


def _child(contract: TaskContract | ChildContract | None) -> str | None:
    if not isinstance(contract, ChildContract):
        return None
    return f"{contract.name}@{contract.version} {contract.definition_hash}"


def contract_changes(old: Iterable[TaskContract], new: Iterable[TaskContract]) -> list[Change]:
    """Declared task contracts: added, removed, version, compensated_by and field changes."""
    before = {c.name: c for c in sorted(old, key=lambda c: _key(c.version))}
    after = {c.name: c for c in sorted(new, key=lambda c: _key(c.version))}
    out: list[Change] = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        if b is None and a is not None:
            out.append(Change("added", "contract", name, None, a.version))
            continue
        if a is None and b is not None:
            out.append(Change("removed", "contract", name, b.version, None))
            continue
        assert a is not None and b is not None
        _pair(out, "contract", f"{name} version", b.version, a.version)
        _pair(out, "contract", f"{name} compensated_by", b.compensated_by, a.compensated_by)
        for c in type_changes(b.input, a.input, f"{name} input", "contract"):
            out.append(c)
        for c in type_changes(b.output, a.output, f"{name} output", "contract"):
            out.append(c)
    return out


def _key(version: str) -> tuple[object, ...]:
    from orbit_core.semver import semver_key

    return semver_key(version)


def diff(old: Side, new: Side, *, workflow: str | None = None) -> ProcessDiff:
    old_defs = {d.name: d for d in old.definitions}
    new_defs = {d.name: d for d in new.definitions}
    names = [*old_defs, *(n for n in new_defs if n not in old_defs)]
    workflows: list[WorkflowDiff] = []
    for name in sorted(names):
        if workflow is not None and name != workflow:
            continue
        b, a = old_defs.get(name), new_defs.get(name)
        if b is None and a is not None:
            workflows.append(WorkflowDiff(name, None, a.version, "added", ()))
        elif a is None and b is not None:
            workflows.append(WorkflowDiff(name, b.version, None, "removed", ()))
        elif a is not None and b is not None:
            changes = tuple(workflow_changes(b, a))
            status: Literal["changed", "unchanged"] = "changed" if changes else "unchanged"
            workflows.append(WorkflowDiff(name, b.version, a.version, status, changes))
    contracts = (
        () if workflow is not None else tuple(contract_changes(*comparable_contracts(old, new)))
    )
    report = compare(old, new, workflow=workflow)
    return ProcessDiff(tuple(workflows), contracts, report)


# ---------------------------------------------------------------- rendering


def render_text(result: ProcessDiff, paint: Any = None) -> str:
    def style(change: Change) -> str:
        line = change.line()
        if paint is None:
            return line
        colour = {"added": "green", "removed": "red", "changed": "yellow", "renamed": "cyan"}
        return str(paint(line, fg=colour[change.kind]))

    lines: list[str] = []
    for w in result.workflows:
        if w.status == "unchanged":
            continue
        lines.append(f"workflow {w.title()}")
        lines += [f"  {style(c)}" for c in w.changes]
    if result.contracts:
        lines.append("contracts")
        lines += [f"  {style(c)}" for c in result.contracts]
    findings = [f for f in result.compatibility.findings if f.severity in ("error", "warning")]
    if findings:
        lines.append("compatibility")
        lines += [f"  {f.line()}" for f in findings]
    lines.append(f"summary: {result.summary()}")
    return "\n".join(lines) + "\n"


def _cell(text: str | None) -> str:
    if text is None:
        return ""
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def render_markdown(result: ProcessDiff) -> str:
    lines = ["## Process changes", "", f"**Summary:** {result.summary()}", ""]

    def table(changes: Iterable[Change]) -> None:
        lines.extend(["| Change | Area | Subject | Before | After |", "|---|---|---|---|---|"])
        for c in changes:
            lines.append(
                f"| {c.kind} | {c.area} | {_cell(c.subject)} | {_cell(c.old)} | {_cell(c.new)} |"
            )
        lines.append("")

    for w in result.workflows:
        if w.status == "unchanged":
            continue
        lines.extend([f"### Workflow `{w.title()}`", ""])
        if w.changes:
            table(w.changes)
    if result.contracts:
        lines.extend(["### Contracts", ""])
        table(result.contracts)
    lines.extend(["### Compatibility", "", f"**{result.verdict()}**", ""])
    findings = [f for f in result.compatibility.findings if f.severity in ("error", "warning")]
    if findings:
        lines += [f"- {_cell(f.line())}" for f in findings]
        lines.append("")
    return "\n".join(lines)
