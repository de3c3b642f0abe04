"""Flow-control declarations (docs/language/flow-control.md): `concurrency`,
`rate`, `priority`, `fairness` and `debounce` on a workflow or a task step.

Counts and durations are literals, as in `retry` and `limits`, so a limit
is part of the definition and its hash. Keys, the priority and a fairness
weight are expressions, typed here against what is known when the engine
decides: a workflow's when an execution is started (its `input` only), a
step's when its task is scheduled (`input` and the `for` variable; step
outputs are not keys, since a key that changes with a retry would move work
between queues).

Codes E1100 to E1111 and W1100 are this module's; docs/language.md lists them.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from orbit_core.ir import expr as e
from orbit_core.ir.definition import Concurrency, Debounce, Fairness, Flow, Rate
from orbit_core.ir.types import Primitive
from orbit_core.ir.walk import walk
from orbit_lang import ast
from orbit_lang.check.env import Env
from orbit_lang.check.expressions import ExprChecker
from orbit_lang.check.report import Reporter, did_you_mean, first_declared
from orbit_lang.check.types import INT, Type, is_optional, render, strip
from orbit_lang.source import Span

FlowMember = ast.FlowBlock | ast.Priority

# The settings of each block, required ones first.
SETTINGS: dict[str, tuple[str, ...]] = {
    "concurrency": ("max", "key"),
    "rate": ("max", "per", "burst", "key", "on_exceed"),
    "fairness": ("key", "weight"),
    "debounce": ("period", "max_wait", "key"),
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "concurrency": ("max",),
    "rate": ("max", "per"),
    "fairness": ("key",),
    "debounce": ("period",),
}
MAX_LIMIT = 1_000_000
KEY_TYPES = ("String", "Int", "UUID")
_KEY_PRIMITIVES = frozenset({"string", "int", "uuid"})


def check_flow(
    members: Sequence[FlowMember], env: Env, report: Reporter, *, step: bool
) -> Flow | None:
    """The flow declaration of a workflow (`step=False`) or a task step, or
    None when it declares none or only wrong ones."""
    return _FlowChecker(env, report, step).run(members)


def step_env(env: Env, report: Reporter) -> Env:
    """What a step's keys may read: its `input` and `for` variable."""
    return attrs.evolve(
        env,
        steps={},
        blocked=lambda name, span: _not_known(report, name, span, step=True),
        failure=False,
        event=None,
    )


def workflow_env(workflow_input: Type, step_names: frozenset[str], report: Reporter) -> Env:
    """What a workflow's keys may read: its `input`, known when it starts."""
    return Env(
        input=workflow_input,
        step_names=step_names,
        blocked=lambda name, span: _not_known(report, name, span, step=False),
    )


def _not_known(report: Reporter, name: str, span: Span, *, step: bool) -> None:
    where = "a step's task is scheduled" if step else "an execution starts"
    report.error(
        "E1107",
        f"step `{name}` is not known when {where}",
        span,
        help="derive the key from `input`",
    )


class _FlowChecker:
    def __init__(self, env: Env, report: Reporter, step: bool) -> None:
        self.env = env
        self.report = report
        self.step = step

    def run(self, members: Sequence[FlowMember]) -> Flow | None:
        seen: dict[str, FlowMember] = {}
        flow = Flow()
        for member in members:
            word = member.kind.name if isinstance(member, ast.FlowBlock) else "priority"
            first = seen.get(word)
            if first is not None:
                self.report.error(
                    "E1110",
                    f"duplicate `{word}`",
                    member.keyword,
                    labels=[first_declared(first.keyword)],
                    help=f"keep one `{word}` block" if word != "priority" else "keep one",
                )
                continue
            seen[word] = member
            if isinstance(member, ast.Priority):
                flow = attrs.evolve(flow, priority=self._int_expr(member.expression, "a priority"))
                continue
            if self.step and word == "debounce":
                self.report.error(
                    "E1109",
                    "`debounce` applies to starts; a step cannot declare it",
                    member.keyword,
                    help="move `debounce` to the workflow",
                )
                continue
            settings = self._settings(word, member)
            if settings is not None:
                part = self._block(word, member, settings)
                if isinstance(part, Concurrency):
                    flow = attrs.evolve(flow, concurrency=part)
                elif isinstance(part, Rate):
                    flow = attrs.evolve(flow, rate=part)
                elif isinstance(part, Fairness):
                    flow = attrs.evolve(flow, fairness=part)
                elif isinstance(part, Debounce):
                    flow = attrs.evolve(flow, debounce=part)
        return None if flow == Flow() else flow

    # ------------------------------------------------------------ settings

    def _settings(self, word: str, member: ast.FlowBlock) -> dict[str, ast.Setting] | None:
        known = SETTINGS[word]
        found: dict[str, ast.Setting] = {}
        ok = True
        for setting in member.settings:
            name = setting.name.name
            if name not in known:
                listed = ", ".join(f"`{k}`" for k in known)
                self.report.error(
                    "E1100",
                    f"unknown `{word}` setting `{name}`",
                    setting.name.span,
                    help=did_you_mean(name, known) or f"`{word}` takes {listed}",
                )
                continue
            if name in found:
                self.report.error(
                    "E1101",
                    f"duplicate `{word}` setting `{name}`",
                    setting.name.span,
                    labels=[first_declared(found[name].name.span)],
                )
                continue
            found[name] = setting
        for name in REQUIRED[word]:
            if name not in found:
                self.report.error(
                    "E1102",
                    f"`{word}` needs `{name}`",
                    member.kind.span,
                    help=_EXAMPLES[word],
                )
                ok = False
        return found if ok else None

    def _block(
        self, word: str, member: ast.FlowBlock, s: dict[str, ast.Setting]
    ) -> Concurrency | Rate | Fairness | Debounce | None:
        # An unknown or repeated setting (E1100, E1101) fails the block too,
        # after its values are checked.
        before = self.report.error_count - (len(member.settings) - len(s))
        key = self._key(s["key"].value) if "key" in s else None
        if word == "concurrency":
            limit = self._count(s["max"].value, "max")
            self._constant_key(s.get("key"), key)
            result: Concurrency | Rate | Fairness | Debounce = Concurrency(limit or 1, key)
        elif word == "rate":
            limit = self._count(s["max"].value, "max")
            period = self._duration(s["per"].value, "per")
            burst = self._count(s["burst"].value, "burst") if "burst" in s else None
            if burst is not None and limit is not None and burst < limit:
                self.report.error(
                    "E1111",
                    "`burst` must be at least `max`",
                    s["burst"].value.span,
                    notes=["`burst` is how many may go at once after a quiet period"],
                )
            on_exceed = self._on_exceed(s["on_exceed"].value) if "on_exceed" in s else "wait"
            result = Rate(limit or 1, period or 1, burst, key, on_exceed)
        elif word == "fairness":
            weight = self._int_expr(s["weight"].value, "a weight") if "weight" in s else None
            result = Fairness(key or e.Null(), weight)
        else:
            period = self._duration(s["period"].value, "period")
            max_wait = self._duration(s["max_wait"].value, "max_wait") if "max_wait" in s else None
            if max_wait is not None and period is not None and max_wait < period:
                self.report.error(
                    "E1111", "`max_wait` must be at least `period`", s["max_wait"].value.span
                )
            result = Debounce(period or 1, max_wait, key)
        return None if self.report.error_count > before else result

    def _count(self, value: ast.Expr, name: str) -> int | None:
        if isinstance(value, ast.IntLiteral) and 1 <= value.value <= MAX_LIMIT:
            return value.value
        self.report.error(
            "E1103", f"`{name}` must be an integer literal between 1 and {MAX_LIMIT}", value.span
        )
        return None

    def _duration(self, value: ast.Expr, name: str) -> int | None:
        if isinstance(value, ast.DurationLiteral) and value.milliseconds > 0:
            return value.milliseconds
        self.report.error(
            "E1104",
            f"`{name}` must be a duration literal greater than zero, such as `1m`",
            value.span,
        )
        return None

    def _on_exceed(self, value: ast.Expr) -> str:
        choices = ("wait",) if self.step else ("wait", "drop")
        if isinstance(value, ast.Name) and value.name in choices:
            return value.name
        if self.step and isinstance(value, ast.Name) and value.name == "drop":
            self.report.error(
                "E1108",
                "a step's task cannot be dropped; `on_exceed` of a step is `wait`",
                value.span,
                notes=["`drop` refuses starts of the workflow over its rate"],
            )
            return "wait"
        self.report.error(
            "E1108",
            "`on_exceed` must be " + " or ".join(f"`{c}`" for c in choices),
            value.span,
        )
        return "wait"

    # ------------------------------------------------------------ expressions

    def _key(self, node: ast.Expr) -> e.Expr | None:
        checker = ExprChecker(self.report, self.env)
        typed = checker.infer(node)
        if checker.errors:
            return None
        found = typed.type
        base = strip(found)
        if is_optional(found) or not (isinstance(base, Primitive) and base.kind in _KEY_PRIMITIVES):
            self.report.error(
                "E1105",
                f"a key must be a `String`, `Int` or `UUID`, not `{render(found)}`",
                node.span,
                notes=["equal keys share a limit; a missing or structured value has no single key"],
                help="use one field of the input, e.g. `input.customer_id`",
            )
            return None
        return typed.ir

    def _int_expr(self, node: ast.Expr, what: str) -> e.Expr | None:
        checker = ExprChecker(self.report, self.env)
        typed = checker.infer(node)
        if checker.errors:
            return None
        if typed.type != INT:
            self.report.error(
                "E1106",
                f"{what} must be an `Int`, not `{render(typed.type)}`",
                node.span,
                help="higher values go first; use `coalesce(...)` for an optional field",
            )
            return None
        return typed.ir

    def _constant_key(self, setting: ast.Setting | None, key: e.Expr | None) -> None:
        if setting is None or key is None:
            return
        if not any(isinstance(n, e.Input | e.Var) for n in walk(key)):
            self.report.warning(
                "W1100",
                "this key is the same for every execution",
                setting.value.span,
                help="leave out `key` for one limit over all of them",
            )


_EXAMPLES = {
    "concurrency": "for example `concurrency { max: 5, key: input.customer_id }`",
    "rate": "for example `rate { max: 100, per: 1m }`",
    "fairness": "for example `fairness { key: input.tenant }`",
    "debounce": "for example `debounce { period: 10s, key: input.id }`",
}
