"""Diagnostics from the static envelope (orbit_core.envelope, issue 44).

A workflow that declares `limits { max_history_events: N }` says how long
a run may grow; when its own definition can outgrow that, the run ends with
LIMIT_EXCEEDED at run time, so the compiler says so at the step that makes
it large, as a warning (the definition is valid, and a typical run may stay
far below): W1340 when nothing bounds a run's history (a `for` over a list
that has no `max_fan_out`), W1341 when the worst case is a number above the
limit. A workflow without `max_history_events` gets nothing: most of the
book's workflows declare no limits, and their `orbit check` output stays as
it was.

Under a policy (chapter 58) the same findings are E1340/E1341 (or
W1340/W1341 with `severity = "warning"`), measured against the limits the
policy's `envelope` rule names for the server (`max_history_events`,
`max_fan_out`), or the workflow's own; see orbit_lang.policy.
"""

from __future__ import annotations

from collections.abc import Iterable

from orbit_core.envelope import Envelope, Limits, envelope, stricter
from orbit_core.ir import Definition
from orbit_lang import ast
from orbit_lang.diagnostics import Diagnostic, Severity
from orbit_lang.source import Span

UNBOUNDED = "1340"
TOO_LARGE = "1341"


def step_spans(node: ast.Workflow) -> dict[str, Span]:
    """Each step's name span by the envelope's scope key (`charge`,
    `on failure: alert`, `on event review: note`)."""
    spans = {s.name.name: s.name.span for s in node.steps}
    for member in node.members:
        if isinstance(member, ast.OutcomeHandler):
            for s in member.steps:
                spans[f"on {member.kind.name}: {s.name.name}"] = s.name.span
        elif isinstance(member, ast.EventHandler):
            for s in member.steps:
                spans[f"on event {member.signal.name}: {s.name.name}"] = s.name.span
    return spans


def findings(
    node: ast.Workflow,
    definition: Definition,
    limits: Limits,
    severity: Severity,
    where: str,
) -> list[Diagnostic]:
    """What the envelope of `definition` under `limits` says against the
    history limit in force (the stricter of `limits` and the workflow's
    own); `where` names that limit in messages."""
    limit = stricter(limits.max_history_events, definition.limits.get("max_history_events"))
    if limit is None:
        return []
    env = envelope(definition, limits)
    spans = step_spans(node)
    prefix = "E" if severity is Severity.ERROR else "W"
    build = Diagnostic.error if severity is Severity.ERROR else Diagnostic.warning
    name = definition.name
    worst = env.cost.worst_events
    if worst is None:
        out = []
        for cause in env.unbounded:
            span = spans.get(cause.step or "", node.name.span)
            out.append(
                build(
                    prefix + UNBOUNDED,
                    f"{cause.reason}: a run of `{name}` has no bound on its history "
                    f"events, and {where} ends it with LIMIT_EXCEEDED",
                    span,
                    help=cause.fix,
                )
            )
        return out
    if worst <= limit:
        return []
    key, largest = _largest(env)
    span = spans.get(key, node.name.span) if key else node.name.span
    notes = [_per_run(env)]
    if key:
        notes.insert(0, f"step `{key}` alone can record up to {largest} events")
    return [
        build(
            prefix + TOO_LARGE,
            f"a run of `{name}` can record up to {worst} history events, more than {where}",
            span,
            notes=notes,
            help="lower its `max_fan_out` or retry attempts, split the work with "
            "`continue_as_new`, or raise `max_history_events`",
        )
    ]


def _largest(env: Envelope) -> tuple[str, int]:
    best, most = "", -1
    for step in env.steps:
        worst = step.cost.worst_events
        if worst is not None and worst > most:
            best, most = step.key.removeprefix("compensate:"), worst
    return best, most


def _per_run(env: Envelope) -> str:
    if env.per_run:
        return "the count is per run: `continue_as_new` starts the next run with a new history"
    return "worst case: every attempt fails and the run aborts into its compensation and handlers"


def check_envelopes(
    workflows: Iterable[tuple[ast.Workflow, Definition]],
) -> list[Diagnostic]:
    """The compiler's warnings: each workflow against its own `limits`."""
    out: list[Diagnostic] = []
    for node, definition in workflows:
        declared = definition.limits.get("max_history_events")
        if declared is None:
            continue
        where = f"its `max_history_events: {declared}`"
        out += findings(node, definition, Limits(), Severity.WARNING, where)
    return out
