"""Organisation policies (chapter 58): rules that compiled workflows must follow.

A policy file is TOML read with `tomllib`; `load_policy` validates every key
(unknown keys, wrong types, missing and invalid values are a `PolicyError`
naming the problem, so a typo cannot switch a rule off). `check_policies`
runs after a compilation without errors, on each workflow's IR definition,
with its AST only for positions: it returns P-code diagnostics in the
compiler's model, rendered by `orbit_lang.render` like any other.

A rule finds violations (a workflow, or a step with its scope key: `charge`,
`on failure: alert`, `on event review: note`). Inline waivers (`//
policy-allow: <rule> <reason>` comments directly above a step or the
workflow line, read from the source text, so they never change the hash)
are applied first, then the file's exemptions; mistakes in waivers are
P0001/P0002 and exemptions that matched nothing are reported as warnings
beside the diagnostics.

`require_approval` reasons over conditions with three-valued logic: each
comparison of an input field with a number is decided by the rule's own
threshold (an interval) or left unknown, and fields of plain compute steps
are replaced by their expressions first. Unknown pieces never count as true,
so the check can reject a safe workflow but never pass an unsafe one.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from orbit_core.envelope import Limits
from orbit_core.ir import Definition, Step
from orbit_core.ir import expr as e
from orbit_core.ir.printer import render_expr
from orbit_core.ir.types import FLOAT, INT, OptionalType, RecordType
from orbit_lang import ast
from orbit_lang.compiler import CompileResult
from orbit_lang.diagnostics import Diagnostic, Severity, sort_key
from orbit_lang.envelope import findings
from orbit_lang.source import SourceFile, Span

# ---------------------------------------------------------------- the file


class PolicyError(Exception):
    """A policy file that cannot be used; the message starts `policy <file>: `."""


CODES = {
    "require_compensation": "P0101",
    "require_retry": "P0102",
    "max_attempts": "P0103",
    "require_timeout": "P0104",
    "require_approval": "P0105",
    "require_handler": "P0106",
    "forbid_tasks": "P0107",
    "allow_tasks": "P0108",
    "max_fan_out": "P0109",
    "require_limits": "P0110",
    "require_signal_timeout": "P0111",
    # The static envelope (issue 44): E1340/E1341, W1340/W1341 as a warning.
    "envelope": "E1340",
}
# Each type's own keys, and which of them must be given.
_KEYS: dict[str, tuple[str, ...]] = {
    "require_compensation": ("tasks", "compensate_with"),
    "require_retry": ("tasks", "min_attempts", "max_attempts"),
    "max_attempts": ("tasks", "max"),
    "require_timeout": ("tasks", "max", "queue_timeout"),
    "require_approval": ("tasks", "signals", "when", "require_condition"),
    "require_handler": ("handlers",),
    "forbid_tasks": ("tasks",),
    "allow_tasks": ("tasks",),
    "max_fan_out": ("max", "require_max_parallel"),
    "require_limits": ("keys",),
    "require_signal_timeout": ("signals", "max", "allow_workflow_timeout"),
    "envelope": ("max_history_events", "max_fan_out"),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "require_compensation": ("tasks",),
    "require_retry": ("tasks",),
    "max_attempts": ("max",),
    "require_approval": ("tasks", "signals"),
    "forbid_tasks": ("tasks",),
    "allow_tasks": ("tasks",),
    "max_fan_out": ("max",),
    "require_limits": ("keys",),
}
_COMMON = ("id", "type", "severity", "description", "workflows", "exclude_workflows")
_HANDLERS = ("failure", "cancel", "timeout")
_LIMITS = ("max_fan_out", "max_history_events", "max_payload_bytes")
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_WHEN = re.compile(
    r"^\s*input((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*(>=|>|<=|<|==|!=)\s*(-?\d+(?:\.\d+)?)\s*$"
)


@attrs.frozen
class Threshold:
    """The `when` of require_approval: `input.<path> <op> <number>`."""

    path: tuple[str, ...]
    op: str
    value: float
    text: str


@attrs.frozen
class Rule:
    id: str
    type: str
    severity: Severity
    description: str | None
    workflows: tuple[str, ...]
    exclude_workflows: tuple[str, ...]
    options: dict[str, Any]

    @property
    def code(self) -> str:
        return CODES[self.type]

    def get(self, key: str, default: Any = None) -> Any:
        return self.options.get(key, default)


@attrs.frozen
class Exemption:
    index: int
    rule: str
    workflow: str
    step: str | None
    reason: str


@attrs.frozen
class Policy:
    name: str
    description: str | None
    path: str
    rules: tuple[Rule, ...]
    exemptions: tuple[Exemption, ...]


def load_policy(path: str | Path) -> Policy:
    shown = str(path)

    def fail(message: str) -> PolicyError:
        return PolicyError(f"policy {shown}: {message}")

    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise fail(f"cannot read the file: {reason} (os error {exc.errno})") from None
    except tomllib.TOMLDecodeError as exc:
        raise fail(str(exc)) from None
    _only(document, ("policy", "rule", "exemption"), "", fail)
    header = document.get("policy", {})
    if not isinstance(header, dict):
        raise fail("`policy` must be a table")
    _only(header, ("name", "description", "workflows", "exclude_workflows"), "[policy] ", fail)
    name = _string(header, "name", "[policy] ", fail) or Path(path).stem
    description = _string(header, "description", "[policy] ", fail)
    scope = _patterns(header, "workflows", "[policy] ", fail) or ("*",)
    excluded = _patterns(header, "exclude_workflows", "[policy] ", fail) or ()
    tables = document.get("rule", [])
    if not isinstance(tables, list):
        raise fail("`rule` must be an array of tables (`[[rule]]`)")
    rules: list[Rule] = []
    for number, table in enumerate(tables, 1):
        rule = _rule(number, table, scope, excluded, fail)
        if any(r.id == rule.id for r in rules):
            raise fail(f"rule {number}: duplicate id `{rule.id}`")
        rules.append(rule)
    listed = document.get("exemption", [])
    if not isinstance(listed, list):
        raise fail("`exemption` must be an array of tables (`[[exemption]]`)")
    exemptions = [
        _exemption(number, table, {r.id for r in rules}, fail)
        for number, table in enumerate(listed, 1)
    ]
    return Policy(name, description, shown, tuple(rules), tuple(exemptions))


def _only(table: dict[str, Any], keys: Sequence[str], where: str, fail: Any) -> None:
    for key in table:
        if key not in keys:
            raise fail(f"{where}unknown key `{key}` (expected one of: {', '.join(keys)})")


def _string(table: dict[str, Any], key: str, where: str, fail: Any) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise fail(f"{where}`{key}` must be a string")
    return value


def _patterns(table: dict[str, Any], key: str, where: str, fail: Any) -> tuple[str, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(f"{where}`{key}` must be a list of strings")
    return tuple(value)


def _positive(value: Any, where: str, fail: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise fail(f"{where} must be a positive integer")
    checked: int = value
    return checked


def parse_duration(text: str) -> int | None:
    match = _DURATION.match(text)
    if match is None:
        return None
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


# One check per key, in the order the chapter's error table lists them.
def _rule(  # noqa: C901
    number: int, table: Any, scope: tuple[str, ...], excluded: tuple[str, ...], fail: Any
) -> Rule:
    if not isinstance(table, dict):
        raise fail(f"rule {number}: must be a table")
    kind = table.get("type")
    if kind is None:
        raise fail(f"rule {number}: `type` is required")
    if not isinstance(kind, str) or kind not in CODES:
        raise fail(f"rule {number}: unknown type `{kind}`; known types: {', '.join(CODES)}")
    rule_id = table.get("id", kind)
    if not isinstance(rule_id, str) or not rule_id or any(c.isspace() for c in rule_id):
        raise fail(f"rule {number}: `id` must be one word without spaces")
    where = f"rule {rule_id}:"
    for key in table:
        if key not in _COMMON and key not in _KEYS[kind]:
            if key in {k for keys in _KEYS.values() for k in keys}:
                takes = ", ".join(_KEYS[kind])
                raise fail(f"{where} `{key}` does not apply to `{kind}` (it takes: {takes})")
            raise fail(f"{where} unknown key `{key}`")
    for key in _REQUIRED.get(kind, ()):
        if key not in table:
            example = "[...]" if key in ("tasks", "signals", "keys") else "..."
            raise fail(f"{where} `{kind}` needs `{key} = {example}`")
    severity = table.get("severity", "error")
    if severity not in ("error", "warning"):
        raise fail(f'{where} `severity` must be "error" or "warning", not {severity!r}')
    description = _string(table, "description", f"{where} ", fail)
    options: dict[str, Any] = {}
    for key in ("tasks", "signals", "compensate_with", "handlers", "keys"):
        if key in table:
            options[key] = _patterns(table, key, f"{where} ", fail)
    for key in (
        "queue_timeout",
        "require_condition",
        "require_max_parallel",
        "allow_workflow_timeout",
    ):
        if key in table:
            if not isinstance(table[key], bool):
                raise fail(f"{where} `{key}` must be true or false")
            options[key] = table[key]
    for key in ("min_attempts", "max_attempts", "max_history_events", "max_fan_out"):
        if key in table:
            options[key] = _positive(table[key], f"{where} `{key}`", fail)
    if "max" in table:
        if kind in ("require_timeout", "require_signal_timeout"):
            value = table["max"]
            ms = parse_duration(value) if isinstance(value, str) else None
            if ms is None:
                raise fail(f'{where} `max` must be a duration such as "30s" or "7d"')
            options["max"] = (ms, value)
        else:
            options["max"] = _positive(table["max"], f"{where} `max`", fail)
    if options.get("min_attempts", 2) > options.get("max_attempts", math.inf):
        raise fail(f"{where} `min_attempts` is above `max_attempts`")
    for handler in options.get("handlers", ()):
        if handler not in _HANDLERS:
            raise fail(f"{where} unknown handler `{handler}` (expected: {', '.join(_HANDLERS)})")
    for limit in options.get("keys", ()):
        if limit not in _LIMITS:
            raise fail(f"{where} unknown limit `{limit}` (expected: {', '.join(_LIMITS)})")
    if "when" in table:
        text = table["when"]
        match = _WHEN.match(text) if isinstance(text, str) else None
        if match is None:
            raise fail(f"{where} `when` must have the form `input.<field> <op> <number>`")
        path = tuple(match.group(1)[1:].split("."))
        options["when"] = Threshold(path, match.group(2), float(match.group(3)), text.strip())
    return Rule(
        rule_id,
        kind,
        Severity(severity),
        description,
        _patterns(table, "workflows", f"{where} ", fail) or scope,
        _patterns(table, "exclude_workflows", f"{where} ", fail) or excluded,
        options,
    )


def _exemption(number: int, table: Any, ids: set[str], fail: Any) -> Exemption:
    if not isinstance(table, dict):
        raise fail(f"exemption {number}: must be a table")
    _only(table, ("rule", "workflow", "step", "reason"), f"exemption {number}: ", fail)
    rule = table.get("rule")
    if not isinstance(rule, str) or rule not in ids:
        raise fail(f"exemption {number}: unknown rule `{rule}`")
    reason = table.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise fail(f"exemption {number} (`{rule}`): reason is required")
    workflow = _string(table, "workflow", f"exemption {number}: ", fail) or "*"
    step = _string(table, "step", f"exemption {number}: ", fail)
    return Exemption(number, rule, workflow, step, reason)


# ---------------------------------------------------------------- patterns


def glob_match(pattern: str, name: str) -> bool:
    """`*` is any run of characters (dots too), `?` one character; case-sensitive."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.DOTALL) is not None


def _any(patterns: Iterable[str], name: str) -> bool:
    return any(glob_match(p, name) for p in patterns)


def applies(rule: Rule, workflow: str) -> bool:
    return _any(rule.workflows, workflow) and not _any(rule.exclude_workflows, workflow)


# ---------------------------------------------------------------- violations


@attrs.frozen
class Located:
    """A step of a workflow with its scope key and its place in the source."""

    step: Step
    key: str
    block: tuple[Step, ...]
    node: ast.Step | None
    main: bool


@attrs.frozen
class Violation:
    rule: Rule
    policy: Policy
    workflow: str
    step: str | None  # scope key; None for the whole workflow
    span: Span
    message: str
    notes: tuple[str, ...] = ()
    help: str = ""
    code: str | None = None  # when not the rule's own (the envelope's two findings)


def _steps(definition: Definition, node: ast.Workflow) -> Iterator[Located]:
    nodes: dict[str, ast.Step] = {s.name.name: s for s in node.steps}
    for step in definition.steps:
        yield Located(step, step.name, definition.steps, nodes.get(step.name), True)
    for member in node.members:
        if isinstance(member, ast.OutcomeHandler):
            kind = member.kind.name
            steps = definition.handlers.get(kind, ())
            inner = {s.name.name: s for s in member.steps}
            for step in steps:
                yield Located(step, f"on {kind}: {step.name}", steps, inner.get(step.name), False)
        elif isinstance(member, ast.EventHandler):
            signal = member.signal.name
            handler = next((h for h in definition.events if h.signal == signal), None)
            if handler is None:
                continue
            inner = {s.name.name: s for s in member.steps}
            for step in handler.steps:
                key = f"on event {signal}: {step.name}"
                yield Located(step, key, handler.steps, inner.get(step.name), False)


def _and(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _duration(ms: int) -> str:
    return render_expr(e.Duration(ms))


class _Checker:
    def __init__(self, policy: Policy, rule: Rule, definition: Definition, node: ast.Workflow):
        self.policy, self.rule, self.definition, self.node = policy, rule, definition, node
        self.found: list[Violation] = []

    def waive(self) -> str:
        return f"`// policy-allow: {self.rule.id} <reason>`"

    def note(self) -> str:
        where = f"policy {self.policy.name} ({self.policy.path})"
        if self.rule.description:
            return f"{where}: {self.rule.description}"
        return f"required by {where}"

    def report(
        self,
        message: str,
        located: Located | None,
        help: str,
        notes: Sequence[str] = (),
    ) -> None:
        span = self.node.name.span
        if located is not None and located.node is not None:
            span = located.node.name.span
        text = f"policy rule `{self.rule.id}`: {message}"
        self.found.append(
            Violation(
                self.rule,
                self.policy,
                self.definition.name,
                None if located is None else located.key,
                span,
                text,
                (*notes, self.note()),
                f"{help}, or waive it: {self.waive()}",
            )
        )

    def tasks(self, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
        return tuple(self.rule.get("tasks") or default or ())

    def task_steps(self, default: tuple[str, ...] | None = None) -> Iterator[Located]:
        patterns = self.tasks(default)
        for located in _steps(self.definition, self.node):
            task = located.step.task
            if located.step.kind == "task" and task is not None and _any(patterns, task):
                yield located

    def run(self) -> list[Violation]:
        getattr(self, self.rule.type)()
        return self.found

    # One method per rule type.

    def require_compensation(self) -> None:
        allowed = self.rule.get("compensate_with")
        for located in self.task_steps():
            if not located.main:
                continue
            step = located.step
            help = 'add a `compensate { worker "..." with { ... } }` block'
            if step.compensate is None:
                self.report(
                    f"step `{step.name}` calls `{step.task}` but has no compensation", located, help
                )
            elif allowed and not _any(allowed, step.compensate.task):
                patterns = ", ".join(f"`{p}`" for p in allowed)
                self.report(
                    f"step `{step.name}` compensates `{step.task}` with "
                    f"`{step.compensate.task}`, which is not one of {patterns}",
                    located,
                    f"compensate with one of {patterns}",
                )

    def require_retry(self) -> None:
        least = self.rule.get("min_attempts", 2)
        most = self.rule.get("max_attempts")
        for located in self.task_steps():
            step = located.step
            attempts = step.retry.attempts if step.retry is not None else 1
            if attempts < least:
                self.report(
                    f"step `{step.name}` calls `{step.task}` with {attempts} attempt(s); "
                    f"at least {least} required",
                    located,
                    f"add `retry {{ attempts: {least} }}` to the step",
                )
            elif most is not None and attempts > most:
                self._too_many(located, attempts, most)

    def max_attempts(self) -> None:
        most = self.rule.get("max")
        for located in self.task_steps(("*",)):
            step = located.step
            attempts = step.retry.attempts if step.retry is not None else 1
            if attempts > most:
                self._too_many(located, attempts, most)

    def _too_many(self, located: Located, attempts: int, most: int) -> None:
        step = located.step
        self.report(
            f"step `{step.name}` calls `{step.task}` with up to {attempts} attempts; "
            f"at most {most} allowed",
            located,
            f"set `retry {{ attempts: {most} }}` or fewer",
        )

    def require_timeout(self) -> None:
        limit = self.rule.get("max")
        suggestion = limit[1] if limit else "<duration>"
        for located in self.task_steps(("*",)):
            step = located.step
            if step.timeout_ms is None:
                self.report(
                    f"step `{step.name}` calls `{step.task}` without a `timeout`",
                    located,
                    f"add `timeout {suggestion}` to the step",
                )
            elif limit and step.timeout_ms > limit[0]:
                self.report(
                    f"step `{step.name}` has `timeout {_duration(step.timeout_ms)}`; "
                    f"at most {limit[1]} allowed",
                    located,
                    f"shorten it to `timeout {limit[1]}` or less",
                )
            if self.rule.get("queue_timeout") and step.queue_timeout_ms is None:
                self.report(
                    f"step `{step.name}` calls `{step.task}` without a `queue_timeout`",
                    located,
                    "add `queue_timeout <duration>` to the step",
                )

    def require_handler(self) -> None:
        # One violation per workflow, naming every handler it lacks.
        wanted = self.rule.get("handlers") or ("failure",)
        missing = [kind for kind in wanted if kind not in self.definition.handlers]
        if missing:
            self.report(
                f"workflow `{self.definition.name}` has no "
                f"{', '.join(f'`on {kind}`' for kind in missing)} handler",
                None,
                f"add {_and([f'`on {kind} {{ step ... }}`' for kind in missing])}",
            )

    def _calls(self) -> Iterator[tuple[Located, str, bool]]:
        """Every task a step or compensation runs: (step, task, is compensation)."""
        for located in _steps(self.definition, self.node):
            step = located.step
            if step.kind == "task" and step.task is not None:
                yield located, step.task, False
            if step.compensate is not None:
                yield located, step.compensate.task, True

    def forbid_tasks(self) -> None:
        for located, task, compensation in self._calls():
            if _any(self.tasks(), task):
                who = (
                    f"the compensation of step `{located.step.name}`"
                    if compensation
                    else (f"step `{located.step.name}`")
                )
                self.report(f"{who} calls `{task}`, a forbidden task", located, "call another task")

    def allow_tasks(self) -> None:
        for located, task, compensation in self._calls():
            if not _any(self.tasks(), task):
                who = (
                    f"the compensation of step `{located.step.name}`"
                    if compensation
                    else (f"step `{located.step.name}`")
                )
                allowed = ", ".join(f"`{p}`" for p in self.tasks())
                self.report(
                    f"{who} calls `{task}`, a task outside the allowed list",
                    located,
                    f"call a task matching {allowed}",
                )

    def max_fan_out(self) -> None:
        most = self.rule.get("max")
        fan_outs = [s for s in _steps(self.definition, self.node) if s.step.for_each is not None]
        if not fan_outs:
            return
        declared = self.definition.limits.get("max_fan_out")
        name = self.definition.name
        if declared is None:
            steps = ", ".join(f"`{s.key}`" for s in fan_outs)
            self.report(
                f"workflow `{name}` has `for` steps ({steps}) but no "
                "`limits { max_fan_out: ... }`",
                None,
                f"add `limits {{ max_fan_out: {most} }}`",
            )
        elif declared > most:
            self.report(
                f"workflow `{name}` allows `max_fan_out: {declared}`; at most {most} allowed",
                None,
                f"set `max_fan_out` to {most} or less",
            )
        if self.rule.get("require_max_parallel"):
            for located in fan_outs:
                if located.step.max_parallel is None:
                    self.report(
                        f"`for` step `{located.step.name}` has no `max_parallel`",
                        located,
                        "add `max_parallel` to the step",
                    )

    def require_limits(self) -> None:
        for key in self.rule.get("keys") or ():
            if key not in self.definition.limits:
                self.report(
                    f"workflow `{self.definition.name}` does not set `{key}` in `limits`",
                    None,
                    f"add `{key}` to the `limits` block",
                )

    def require_signal_timeout(self) -> None:
        signals = self.rule.get("signals") or ("*",)
        limit = self.rule.get("max")
        workflow_timeout = self.definition.timeout_ms
        for located in _steps(self.definition, self.node):
            step = located.step
            if step.kind != "await" or step.signal is None or not _any(signals, step.signal):
                continue
            timeout = step.timeout_ms
            if timeout is None and self.rule.get("allow_workflow_timeout"):
                timeout = workflow_timeout
            suggestion = limit[1] if limit else "<duration>"
            if timeout is None:
                self.report(
                    f"step `{step.name}` waits for signal `{step.signal}` without a step `timeout`",
                    located,
                    f"add `timeout {suggestion}` to the step",
                )
            elif limit and timeout > limit[0]:
                self.report(
                    f"step `{step.name}` waits up to {_duration(timeout)} for "
                    f"`{step.signal}`; at most {limit[1]} allowed",
                    located,
                    f"shorten the timeout to {limit[1]} or less",
                )

    def envelope(self) -> None:
        """The static envelope against the server limits the rule names
        (and the workflow's own `limits`): orbit_lang.envelope."""
        most = self.rule.get("max_history_events")
        limits = Limits(max_fan_out=self.rule.get("max_fan_out"), max_history_events=most)
        declared = self.definition.limits.get("max_history_events")
        if most is not None and (declared is None or most <= declared):
            where = f"the policy's `max_history_events = {most}`"
        else:
            where = f"its `max_history_events: {declared}`"
        for found in findings(self.node, self.definition, limits, self.rule.severity, where):
            self.found.append(
                Violation(
                    self.rule,
                    self.policy,
                    self.definition.name,
                    None,
                    found.span or self.node.name.span,
                    f"policy rule `{self.rule.id}`: {found.message}",
                    (*found.notes, self.note()),
                    f"{found.help}, or waive it above the workflow: {self.waive()}",
                    found.code,
                )
            )

    def require_approval(self) -> None:
        threshold: Threshold | None = self.rule.get("when")
        signals = self.rule.get("signals") or ()
        need_read = self.rule.get("require_condition", True)
        names = ", ".join(f"`{s}`" for s in signals)
        suffix = f" when {threshold.text}" if threshold else ""
        for located in self.task_steps():
            step = located.step
            if threshold is not None and not _numeric_input(self.definition.input, threshold.path):
                self.report(
                    f"step `{step.name}` calls `{step.task}`, but the workflow input has no "
                    f"numeric field `{'.'.join(threshold.path)}` to evaluate `{threshold.text}`",
                    located,
                    "compare a numeric input field in the rule's `when`",
                )
                continue
            analysis = _Conditions(located.block, threshold)
            if step.when is not None and analysis.value(step.when) is False:
                continue
            by_name = {s.name: s for s in located.block}
            awaits = [
                by_name[d]
                for d in _transitive(step, by_name)
                if by_name[d].kind == "await" and _any(signals, by_name[d].signal or "")
            ]
            if not awaits:
                self.report(
                    f"step `{step.name}` calls `{step.task}` without depending on an approval "
                    f"(`await` of {names}){suffix}",
                    located,
                    f"add a step that awaits the approval signal and make `{step.name}` depend "
                    "on it (`after` or by reading its output)",
                )
                continue
            notes: list[str] = []
            guarded = False
            for gate in awaits:
                runs = gate.when is None or analysis.value(gate.when) is True
                reads = not need_read or (
                    step.when is not None and analysis.reads(step.when, gate.name)
                )
                if runs and reads:
                    guarded = True
                    break
                if not runs and gate.when is not None:
                    notes.append(
                        f"`{gate.name}` may be skipped{suffix}: its condition "
                        f"`{render_expr(gate.when)}` is not implied by the rule"
                    )
                if not reads:
                    notes.append(
                        f"the `when` condition of `{step.name}` does not read `{gate.name}`"
                        f"{suffix}, so the decision does not gate the step"
                    )
            if guarded:
                continue
            first = awaits[0].name
            self.report(
                f"step `{step.name}` calls `{step.task}` without a guaranteed approval{suffix}",
                located,
                f"make `{first}` run whenever the rule's condition holds (no `when`, or one the "
                f"condition implies), and make `{step.name}` read the decision, e.g. "
                f"`when coalesce({first}.approved, false)`",
                notes,
            )


def _numeric_input(record: RecordType, path: tuple[str, ...]) -> bool:
    current: Any = record
    for part in path:
        if isinstance(current, OptionalType):
            current = current.type
        if not isinstance(current, RecordType):
            return False
        found = current.field(part)
        if found is None:
            return False
        current = found.type
    if isinstance(current, OptionalType):
        current = current.type
    return current in (INT, FLOAT)


def _transitive(step: Step, by_name: dict[str, Step]) -> list[str]:
    seen: list[str] = []
    stack = list(step.depends_on)
    while stack:
        name = stack.pop()
        if name in seen or name not in by_name:
            continue
        seen.append(name)
        stack.extend(by_name[name].depends_on)
    return seen


_FLIP = {"ge": "le", "gt": "lt", "le": "ge", "lt": "gt", "eq": "eq", "ne": "ne"}
_OPS = {">=": "ge", ">": "gt", "<=": "le", "<": "lt", "==": "eq", "!=": "ne"}


def _holds(op: str, x: float, value: float) -> bool:
    return {
        "ge": x >= value,
        "gt": x > value,
        "le": x <= value,
        "lt": x < value,
        "eq": x == value,
        "ne": x != value,
    }[op]


class _Conditions:
    """Conditions of one block decided under the rule's threshold, three-valued."""

    def __init__(self, block: tuple[Step, ...], threshold: Threshold | None):
        self.threshold = threshold
        # Fields of plain compute steps stand for their expressions.
        self.computed: dict[tuple[str, str], e.Expr] = {}
        for step in block:
            plain = step.kind == "compute" and step.when is None and step.for_each is None
            if plain and isinstance(step.compute, e.Object):
                for entry in step.compute.entries:
                    self.computed[(step.name, entry.key)] = entry.value

    def _expand(self, x: e.Expr) -> e.Expr:
        if isinstance(x, e.Get) and isinstance(x.target, e.StepRef):
            found = self.computed.get((x.target.name, x.field))
            if found is not None:
                return found
        return x

    def _field(self, x: e.Expr) -> tuple[str, ...] | None:
        path: list[str] = []
        while isinstance(x, e.Get):
            path.insert(0, x.field)
            x = x.target
        return tuple(path) if isinstance(x, e.Input) and path else None

    def _comparison(self, x: e.Binary) -> bool | None:
        """A comparison of an input field with a number, decided by the threshold."""
        threshold = self.threshold
        if threshold is None:
            return None
        op, left, right = x.op, x.left, x.right
        if isinstance(left, (e.Int, e.Float)):
            op, left, right = _FLIP[op], right, left
        path = self._field(left)
        if path is None or path != threshold.path or not isinstance(right, (e.Int, e.Float)):
            return None
        return _implies(_OPS[threshold.op], threshold.value, op, float(right.value))

    def value(self, x: e.Expr) -> bool | None:
        """True or False when the threshold decides `x`, None when it does not."""
        x = self._expand(x)
        if isinstance(x, e.Bool):
            return x.value
        if isinstance(x, e.Unary) and x.op == "not":
            inner = self.value(x.arg)
            return None if inner is None else not inner
        if isinstance(x, e.Binary):
            if x.op in ("and", "or"):
                a, b = self.value(x.left), self.value(x.right)
                if x.op == "and":
                    if a is False or b is False:
                        return False
                    return True if a is True and b is True else None
                if a is True or b is True:
                    return True
                return False if a is False and b is False else None
            if x.op in _FLIP:
                return self._comparison(x)
        return None

    def simplify(self, x: e.Expr) -> e.Expr | bool:
        """`x` with every piece the threshold decides replaced, folded."""
        decided = self.value(x)
        if decided is not None:
            return decided
        x = self._expand(x)
        if isinstance(x, e.Unary) and x.op == "not":
            inner = self.simplify(x.arg)
            return (not inner) if isinstance(inner, bool) else e.Unary("not", inner)
        if isinstance(x, e.Binary) and x.op in ("and", "or"):
            a, b = self.simplify(x.left), self.simplify(x.right)
            absorbing = x.op == "or"
            for side, other in ((a, b), (b, a)):
                if isinstance(side, bool):
                    return absorbing if side is absorbing else other
            assert not isinstance(a, bool) and not isinstance(b, bool)
            return e.Binary(x.op, a, b)
        return x

    def reads(self, condition: e.Expr, step: str) -> bool:
        simplified = self.simplify(condition)
        if isinstance(simplified, bool):
            return False
        from orbit_core.ir.walk import walk

        return any(isinstance(n, e.StepRef) and n.name == step for n in walk(simplified))


def _implies(p_op: str, p: float, q_op: str, q: float) -> bool | None:
    """Does `x p_op p` decide `x q_op q`? True/False when it does, None otherwise."""
    low, high, low_open, high_open = _interval(p_op, p)
    if p_op == "ne":
        return None if q_op not in ("ne", "eq") or q != p else q_op == "ne"
    samples = _corners(low, high, low_open, high_open, q)
    results = {_holds(q_op, x, q) for x in samples}
    return results.pop() if len(results) == 1 else None


def _interval(op: str, v: float) -> tuple[float, float, bool, bool]:
    return {
        "ge": (v, math.inf, False, True),
        "gt": (v, math.inf, True, True),
        "le": (-math.inf, v, True, False),
        "lt": (-math.inf, v, True, True),
        "eq": (v, v, False, False),
        "ne": (-math.inf, math.inf, True, True),
    }[op]


def _corners(low: float, high: float, low_open: bool, high_open: bool, q: float) -> list[float]:
    """Points of the interval that stand for every way a comparison with q can go."""
    eps = 1e-9 * max(1.0, abs(q), abs(low) if math.isfinite(low) else 1.0)
    candidates = [q - eps, q, q + eps]
    if math.isfinite(low):
        candidates.append(low if not low_open else low + eps)
    else:
        candidates.append(-1e308)
    if math.isfinite(high):
        candidates.append(high if not high_open else high - eps)
    else:
        candidates.append(1e308)
    inside = []
    for x in candidates:
        above = x > low or (x == low and not low_open)
        below = x < high or (x == high and not high_open)
        if above and below:
            inside.append(x)
    return inside


# ---------------------------------------------------------------- waivers


_WAIVER = re.compile(r"^(\s*)//\s*policy-allow:\s*(\S*)\s*(.*?)\s*$")


@attrs.frozen
class Waiver:
    rule: str
    reason: str
    span: Span
    workflow: str
    step: str | None  # None: the whole workflow


def _waivers_above(source: SourceFile, line: int, workflow: str, step: str | None) -> list[Waiver]:
    found: list[Waiver] = []
    number = line - 1
    while number >= 1:
        text = source.line_text(number)
        if not text.strip().startswith("//"):
            break
        match = _WAIVER.match(text)
        if match is not None:
            start = len(match.group(1))
            end = len(text.rstrip())
            offset = source.offset(number, start + 1)
            span = Span(
                source.path, number, start + 1, number, end + 1, offset, offset + end - start
            )
            found.append(Waiver(match.group(2), match.group(3), span, workflow, step))
        number -= 1
    found.reverse()
    return found


def _waivers(
    node: ast.Workflow, definition: Definition, sources: dict[str, SourceFile]
) -> list[Waiver]:
    source = sources.get(node.keyword.file)
    if source is None:
        return []
    found = _waivers_above(source, node.keyword.line, definition.name, None)
    for located in _steps(definition, node):
        if located.node is not None:
            found += _waivers_above(source, located.node.keyword.line, definition.name, located.key)
    return found


# ---------------------------------------------------------------- checking


@attrs.frozen
class PolicyReport:
    diagnostics: tuple[Diagnostic, ...]
    # Lines printed before the diagnostics (exemptions that matched nothing).
    warnings: tuple[str, ...]


def check_policies(
    policies: Sequence[Policy],
    workflows: Iterable[tuple[ast.Workflow, Definition]],
    sources: dict[str, SourceFile],
) -> PolicyReport:
    violations: list[Violation] = []
    waivers: list[Waiver] = []
    for node, definition in workflows:
        for policy in policies:
            for rule in policy.rules:
                if applies(rule, definition.name):
                    violations += _Checker(policy, rule, definition, node).run()
        waivers += _waivers(node, definition, sources)
    ids = {rule.id for policy in policies for rule in policy.rules}
    diagnostics: list[Diagnostic] = []
    waived: set[int] = set()
    for waiver in waivers:
        if waiver.rule not in ids:
            known = ", ".join(f"`{i}`" for i in sorted(ids)) or "none"
            diagnostics.append(
                Diagnostic.error(
                    "P0001",
                    f"waiver names unknown policy rule `{waiver.rule}`",
                    waiver.span,
                    notes=[f"the policies define: {known}"],
                    help="fix the rule id or remove the comment",
                )
            )
            continue
        if not waiver.reason:
            diagnostics.append(
                Diagnostic.error(
                    "P0001",
                    f"waiver for policy rule `{waiver.rule}` has no reason",
                    waiver.span,
                    help=f"write `// policy-allow: {waiver.rule} <why this is acceptable>`",
                )
            )
            continue
        used = [
            i
            for i, v in enumerate(violations)
            if v.rule.id == waiver.rule
            and v.workflow == waiver.workflow
            and (waiver.step is None or v.step == waiver.step)
        ]
        if not used:
            diagnostics.append(
                Diagnostic.warning(
                    "P0002",
                    f"waiver for policy rule `{waiver.rule}` suppresses nothing",
                    waiver.span,
                    help="remove the comment",
                )
            )
        waived.update(used)
    lines: list[str] = []
    for policy in policies:
        for exemption in policy.exemptions:
            matched = [
                i
                for i, v in enumerate(violations)
                if v.policy is policy
                and v.rule.id == exemption.rule
                and glob_match(exemption.workflow, v.workflow)
                and (exemption.step is None or v.step == exemption.step)
            ]
            if not matched:
                lines.append(
                    f"policy {policy.path}: exemption {exemption.index} (rule "
                    f"`{exemption.rule}`, workflow `{exemption.workflow}`) matched no violation"
                )
            waived.update(i for i in matched if i not in waived)
    for index, violation in enumerate(violations):
        if index in waived:
            continue
        build = (
            Diagnostic.error if violation.rule.severity is Severity.ERROR else Diagnostic.warning
        )
        diagnostics.append(
            build(
                violation.code or violation.rule.code,
                violation.message,
                violation.span,
                notes=violation.notes,
                help=violation.help,
            )
        )
    order = {path: i for i, path in enumerate(sources)}
    diagnostics.sort(key=lambda d: sort_key(d, order))
    return PolicyReport(tuple(diagnostics), tuple(lines))


def apply_policies(
    result: CompileResult, policies: Sequence[Policy]
) -> tuple[CompileResult, tuple[str, ...]]:
    """`result` with the policy diagnostics merged in by position, and the
    notices to print before them; policies run only on a compilation without
    errors."""
    if not policies or result.errors:
        return result, ()
    sources = dict(result.sources)
    report = check_policies(policies, [(w.node, w.definition) for w in result.workflows], sources)
    order = {path: i for i, path in enumerate(sources)}
    merged = sorted([*result.diagnostics, *report.diagnostics], key=lambda d: sort_key(d, order))
    return attrs.evolve(result, diagnostics=merged), report.warnings
