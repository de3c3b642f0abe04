"""Which members a step may have (chapter 12's table, chapter 31's
restrictions): one action (E0301, E0106), members at most once except
`after` (E0106), members allowed for the action and the block the step is
in (E0307), compensation rules (E0308).

The result is a `StepShape`: the step's action and its members, first
occurrence of each, with misplaced members already reported and left out,
so later phases can trust what they find.
"""

from __future__ import annotations

import attrs

from orbit_lang import ast
from orbit_lang.check.report import Reporter, duplicate_member
from orbit_lang.source import Span

ACTION_WORDS: dict[type, str] = {
    ast.WorkerAction: "worker",
    ast.WorkflowAction: "workflow",
    ast.SleepAction: "sleep",
    ast.AwaitAction: "await",
    ast.ComputeAction: "compute",
}
KINDS: dict[type, str] = {
    ast.WorkerAction: "task",
    ast.WorkflowAction: "workflow",
    ast.SleepAction: "sleep",
    ast.AwaitAction: "await",
    ast.ComputeAction: "compute",
}
MEMBER_WORDS: dict[type, str] = {
    **ACTION_WORDS,
    ast.Using: "using",
    ast.After: "after",
    ast.With: "with",
    ast.Timeout: "timeout",
    ast.QueueTimeout: "queue_timeout",
    ast.Retry: "retry",
    ast.IdempotencyKey: "idempotency_key",
    ast.When: "when",
    ast.ForEach: "for",
    ast.MaxParallel: "max_parallel",
    ast.Compensate: "compensate",
}
ONE_ACTION = "a step can only have one `worker`, `workflow`, `sleep`, `await` or `compute`"
# Members each action takes besides `after` and `when` (chapter 12).
ALLOWED: dict[str, frozenset[type]] = {
    "task": frozenset(
        {
            ast.With,
            ast.Using,
            ast.ForEach,
            ast.MaxParallel,
            ast.Timeout,
            ast.QueueTimeout,
            ast.Retry,
            ast.IdempotencyKey,
            ast.Compensate,
        }
    ),
    "workflow": frozenset({ast.With, ast.ForEach, ast.MaxParallel, ast.Timeout, ast.Compensate}),
    "sleep": frozenset(),
    "await": frozenset({ast.Timeout}),
    "compute": frozenset({ast.ForEach, ast.MaxParallel}),
}
COMPENSATE_ALLOWED = frozenset(
    {
        ast.WorkerAction,
        ast.With,
        ast.Using,
        ast.Timeout,
        ast.QueueTimeout,
        ast.Retry,
        ast.IdempotencyKey,
    }
)
NOTES: dict[tuple[str, type], str] = {
    ("workflow", ast.Retry): "child workflows are durable; put retries on the child's own steps",
    (
        "await",
        ast.ForEach,
    ): "an `await` step receives one signal",
}
HANDLER_AWAIT_NOTE = "handlers run while the execution is finishing; it no longer accepts signals"
EVENT_AWAIT_NOTE = (
    "an `on event` block runs for a signal that has arrived; it cannot wait for another"
)


@attrs.frozen
class CompensateShape:
    member: ast.Compensate
    worker: ast.WorkerAction | None
    members: dict[type, ast.StepMember]

    def get(self, kind: type) -> ast.StepMember | None:
        return self.members.get(kind)


@attrs.frozen
class StepShape:
    step: ast.Step
    # The first action; None when the step has none (E0301).
    action: ast.StepAction | None
    members: dict[type, ast.StepMember]
    after: tuple[ast.Identifier, ...]
    compensate: CompensateShape | None
    # Flow-control members (check/flow.py checks them).
    flow: tuple[ast.FlowBlock | ast.Priority, ...] = ()

    @property
    def kind(self) -> str | None:
        return None if self.action is None else KINDS[type(self.action)]

    @property
    def name(self) -> str:
        return self.step.name.name

    def get(self, kind: type) -> ast.StepMember | None:
        return self.members.get(kind)


def value_span(member: ast.StepMember) -> Span:
    """Where a misplaced member is marked: its value, or the whole member for
    blocks and lists."""
    if isinstance(member, ast.With | ast.IdempotencyKey):
        return member.expression.span
    if isinstance(member, ast.When):
        return member.condition.span
    if isinstance(member, ast.Timeout | ast.QueueTimeout):
        return member.duration.span
    if isinstance(member, ast.MaxParallel):
        return member.value.span
    if isinstance(member, ast.Using):
        return member.language.span
    if isinstance(member, ast.AwaitAction):
        return member.signal.span
    if isinstance(member, ast.WorkerAction):
        return member.task.span
    if isinstance(member, ast.WorkflowAction):
        return member.workflow.span
    if isinstance(member, ast.SleepAction):
        return member.duration.span
    if isinstance(member, ast.ComputeAction):
        return member.expression.span
    return member.span


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def shape_step(step: ast.Step, block: str | None, report: Reporter) -> StepShape:
    """Checks the members of `step`. `block` is None for a workflow step, or
    the handler kind (`failure`, `cancel`, `timeout`, `event`)."""
    action: ast.StepAction | None = None
    members: dict[type, ast.StepMember] = {}
    after: list[ast.Identifier] = []
    flow: list[ast.FlowBlock | ast.Priority] = []
    for member in step.members:
        kind = type(member)
        if isinstance(member, ast.FlowBlock | ast.Priority):
            flow.append(member)
            continue
        if isinstance(member, ast.ACTION_TYPES):
            if action is not None:
                report.error(
                    "E0106", ONE_ACTION, member.keyword, help="split the work into separate steps"
                )
                continue
            action = member
            continue
        if isinstance(member, ast.After):
            after.extend(member.steps)
            continue
        first = members.get(kind)
        if first is not None:
            duplicate_member(report, MEMBER_WORDS[kind], member.keyword, first.keyword)
            continue
        members[kind] = member
    if action is None:
        report.error(
            "E0301",
            f"step `{step.name.name}` does nothing",
            step.name.span,
            help='add `worker "task.name"`, `workflow "Name"`, `sleep 10s`, `await <signal>` '
            "or `compute <expression>`",
        )
    elif block is not None:
        action = _handler_action(action, block, report)
    kind_name = None if action is None else KINDS[type(action)]
    if kind_name is not None:
        _placement(members, kind_name, block, report)
    _fan_out(members, block, report)
    compensate = None
    block_member = members.get(ast.Compensate)
    if isinstance(block_member, ast.Compensate):
        compensate = _compensate_block(block_member, report)
    return StepShape(step, action, members, tuple(after), compensate, tuple(flow))


def _handler_action(action: ast.StepAction, block: str, report: Reporter) -> ast.StepAction | None:
    where = f"an `on {block}` step"
    if isinstance(action, ast.AwaitAction):
        note = EVENT_AWAIT_NOTE if block == "event" else HANDLER_AWAIT_NOTE
        report.error(
            "E0307", f"`await` is not allowed in {where}", action.signal.span, notes=[note]
        )
        return None
    if isinstance(action, ast.WorkflowAction):
        report.error(
            "E0307",
            f"child workflows are not allowed in {where}",
            action.workflow.span,
            help="start the child workflow from a workflow step",
        )
        return None
    return action


def _placement(
    members: dict[type, ast.StepMember], kind: str, block: str | None, report: Reporter
) -> None:
    allowed = ALLOWED[kind]
    for member_kind, member in list(members.items()):
        if member_kind in (ast.When,) or member_kind in allowed:
            continue
        if member_kind in (ast.ForEach, ast.MaxParallel) and block is not None:
            continue  # reported by _fan_out
        if member_kind is ast.MaxParallel and ast.ForEach not in members:
            continue  # reported by _fan_out
        del members[member_kind]
        if member_kind is ast.Compensate:
            report.error(
                "E0308",
                f"{_article(kind)} `{kind}` step has nothing to compensate",
                member.span,
            )
            continue
        note = NOTES.get((kind, member_kind))
        word = MEMBER_WORDS[member_kind]
        report.error(
            "E0307",
            f"`{word}` is not allowed in {_article(kind)} `{kind}` step",
            value_span(member),
            notes=[note] if note else [],
        )
    if block is not None and ast.Compensate in members:
        member = members.pop(ast.Compensate)
        report.error(
            "E0308",
            "handler steps cannot declare `compensate`",
            member.span,
            help="handler steps are not compensated; undo work in the workflow's own steps",
        )


def _fan_out(members: dict[type, ast.StepMember], block: str | None, report: Reporter) -> None:
    if block is not None:
        for member_kind in (ast.ForEach, ast.MaxParallel):
            found = members.pop(member_kind, None)
            if found is not None:
                word = MEMBER_WORDS[member_kind]
                report.error(
                    "E0307", f"`{word}` is not allowed in an `on {block}` step", value_span(found)
                )
        return
    if ast.MaxParallel in members and ast.ForEach not in members:
        report.error(
            "E0307",
            "`max_parallel` only applies to `for` steps",
            value_span(members.pop(ast.MaxParallel)),
            help="add `for item in <list>` to fan the step out",
        )


def _compensate_block(member: ast.Compensate, report: Reporter) -> CompensateShape | None:
    worker: ast.WorkerAction | None = None
    members: dict[type, ast.StepMember] = {}
    has_other_action = False
    for inner in member.members:
        kind = type(inner)
        if isinstance(inner, ast.ACTION_TYPES) and not isinstance(inner, ast.WorkerAction):
            has_other_action = True
            report.error(
                "E0308",
                "compensation must call a worker task",
                inner.keyword,
                help='use `worker "task.name"` in the `compensate` block',
            )
            continue
        if kind not in COMPENSATE_ALLOWED:
            report.error(
                "E0307",
                f"`{MEMBER_WORDS[kind]}` is not allowed in a `compensate` block",
                value_span(inner),
            )
            continue
        if isinstance(inner, ast.WorkerAction):
            if worker is not None:
                report.error(
                    "E0106", ONE_ACTION, inner.keyword, help="split the work into separate steps"
                )
                continue
            worker = inner
            continue
        first = members.get(kind)
        if first is not None:
            duplicate_member(report, MEMBER_WORDS[kind], inner.keyword, first.keyword)
            continue
        members[kind] = inner
    if worker is None:
        if not has_other_action:
            report.error(
                "E0308",
                "`compensate` block needs a `worker`",
                member.keyword,
                help='add `worker "task.name"` with the task that undoes the step',
            )
        return None
    return CompensateShape(member, worker, members)
