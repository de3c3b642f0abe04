"""The text `orbit inspect FILE` prints about a compiled definition.

It answers "what does this workflow do?" without reading JSON: the types it
takes and returns, its steps in execution order with their policies and
compensations, the signal/query/handler surface of `orbit-ir/2`, and every
contract it calls. Timeouts are printed as the CLI prints every duration
(`5m00s`, `10.0s`), as the book's transcript does; a sleep keeps the source
spelling of its action (`sleep 1s`). Record fields with a default show it
as the source declares it (`excitement: Int = 3`), so the summary tells
which input fields a caller may leave out.
"""

from __future__ import annotations

import json
from typing import Any

from orbit_cli.output import duration
from orbit_core.ir import ChildContract, Definition, Step, TaskContract
from orbit_core.ir.types import RecordType, Type, render_type

NAME_WIDTH = 22
INDENT = " " * (2 + NAME_WIDTH + 1)


def source_duration(ms: int) -> str:
    """A duration as ORBIT source writes it: `2d`, `1d6h`, `2h15m`, `10s`, `1.5s`, `250ms`."""
    if ms < 1000:
        return f"{ms}ms"
    parts = []
    rest = ms
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    if rest:
        seconds = rest / 1000
        parts.append(f"{seconds:g}s")
    return "".join(parts)


def literal(value: Any) -> str:
    """A constant as ORBIT source writes it: `"USD"`, `3`, `true`, `[1, 2]`, `{ a: 1 }`."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k}: {literal(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def render_with_defaults(t: Type) -> str:
    """`render_type`, with each default of an unnamed record's fields: `{ n: Int = 1 }`."""
    if not isinstance(t, RecordType) or t.name is not None or not t.fields:
        return render_type(t)
    fields = [
        f"{f.name}: {render_type(f.type)}" + (f" = {literal(f.default)}" if f.has_default else "")
        for f in t.fields
    ]
    return "{ " + ", ".join(fields) + " }"


def summary(defn: Definition) -> str:
    lines = [f"workflow {defn.name}@{defn.version}"]
    if defn.description:
        lines.append(f"  {defn.description}")
    lines += [
        f"  ir:      {defn.ir_version}",
        f"  hash:    {defn.definition_hash}",
        f"  input:   {render_with_defaults(defn.input)}",
        f"  output:  {render_type(defn.output)}",
    ]
    if defn.timeout_ms is not None:
        lines.append(f"  timeout: {duration(defn.timeout_ms)}")
    if defn.retention_ms is not None:  # beyond the book: docs/retention.md
        lines.append(f"  retention: {duration(defn.retention_ms)}")
    lines += ["", "steps (execution order)"]
    lines += [line for step in defn.steps for line in _step_lines(step, defn)]
    lines += _surface(defn)
    lines += ["", "contracts"]
    for key in sorted(defn.contracts):
        lines += _contract_lines(defn.contracts[key])
    return "\n".join(lines)


def _action(step: Step, defn: Definition) -> str:
    if step.kind == "task" and step.task is not None:
        contract = defn.contracts.get(step.task)
        version = f"@{contract.version}" if contract is not None else ""
        return f"{step.task}{version}"
    if step.kind == "workflow" and step.workflow is not None:
        child = defn.contracts.get(f"workflow:{step.workflow}")
        version = f"@{child.version}" if child is not None else ""
        return f"workflow {step.workflow}{version}"
    if step.kind == "sleep" and step.sleep_ms is not None:
        return f"sleep {source_duration(step.sleep_ms)}"
    if step.kind == "await":
        return f"await {step.signal}"
    return step.kind


def _step_lines(step: Step, defn: Definition) -> list[str]:
    head = _action(step, defn)
    if step.using:
        head += f" using {step.using}"
    policies = [head]
    if step.for_each is not None:
        parallel = f" (max_parallel {step.max_parallel})" if step.max_parallel else ""
        policies.append(f"for each {step.for_each.var}{parallel}")
    if step.retry is not None and step.retry.attempts > 1:
        policies.append(f"retry {step.retry.attempts}x {step.retry.backoff}")
    if step.timeout_ms is not None:
        policies.append(f"timeout {duration(step.timeout_ms)}")
    if step.queue_timeout_ms is not None:
        policies.append(f"queue_timeout {duration(step.queue_timeout_ms)}")
    text = ", ".join(policies)
    if step.depends_on:
        text += " after " + ", ".join(step.depends_on)
    if step.when is not None:
        text += " [conditional]"
    lines = [f"  {step.name:<{NAME_WIDTH}} {text}"]
    if step.compensate is not None:
        lines.append(f"{INDENT}↺ compensate {step.compensate.task}")
    return lines


def _surface(defn: Definition) -> list[str]:
    lines: list[str] = []
    if defn.signals:
        lines += ["", "signals"]
        lines += [
            f"  {s.name:<{NAME_WIDTH}} {render_with_defaults(s.payload)}" for s in defn.signals
        ]
    if defn.queries:
        lines += ["", "queries"]
        lines += [f"  {q.name:<{NAME_WIDTH}} {render_type(q.type)}" for q in defn.queries]
    for kind, steps in defn.handlers.items():
        lines += ["", f"on {kind}"]
        lines += [line for step in steps for line in _step_lines(step, defn)]
    for handler in defn.events:
        lines += ["", f"on event {handler.signal}"]
        lines += [line for step in handler.steps for line in _step_lines(step, defn)]
    if defn.limits:
        lines += ["", "limits"]
        lines += [f"  {name:<{NAME_WIDTH}} {value}" for name, value in defn.limits.items()]
    if defn.continue_as_new is not None:
        condition = " [conditional]" if defn.continue_as_new.when is not None else ""
        lines += ["", f"continue_as_new{condition}"]
    return lines


def _contract_lines(contract: TaskContract | ChildContract) -> list[str]:
    if isinstance(contract, ChildContract):
        short = contract.definition_hash.removeprefix("sha256:")[:12]
        head = f"  workflow {contract.name}@{contract.version} (sha256:{short})"
    else:
        head = f"  {contract.name}@{contract.version}"
    lines = [
        head,
        f"    in:  {render_with_defaults(contract.input)}",
        f"    out: {render_type(contract.output)}",
    ]
    if isinstance(contract, TaskContract) and contract.effect is not None:
        # Issue 38: only a declared class is printed, so older output is unchanged.
        lines.append(f"    effect: {contract.effect}")
    return lines
