"""Task contracts (chapter 10): members, record-typed input and output
(E0310, RULINGS §6), `compensated_by` (E0316), semantic versions
(W0201) and the effect class of issue 38 (E1000 unknown class, E1001 the
clause written twice; docs/restart-and-fork.md)."""

from __future__ import annotations

import re

import attrs

from orbit_core.ir import TaskContract
from orbit_core.ir.definition import EFFECT_CLASSES
from orbit_core.ir.types import EMPTY_RECORD, RecordType
from orbit_core.ir.types import Type as IRType
from orbit_lang import ast
from orbit_lang.check.declarations import Declarations
from orbit_lang.check.report import Reporter, did_you_mean, duplicate_member, first_declared
from orbit_lang.check.typeexpr import TypeResolver
from orbit_lang.check.types import JSON, render

DEFAULT_VERSION = "1.0.0"
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
_TASK_WORDS: dict[type, str] = {
    ast.Version: "version",
    ast.Description: "description",
    ast.TaskInput: "input",
    ast.TaskOutput: "output",
    ast.CompensatedBy: "compensated_by",
    ast.Effect: "effect",
}


@attrs.frozen
class Contract:
    node: ast.Task
    ir: TaskContract

    @property
    def name(self) -> str:
        return self.ir.name

    @property
    def compensated_by(self) -> str | None:
        return self.ir.compensated_by


def check_version(value: ast.StringLiteral, report: Reporter) -> None:
    if SEMVER.fullmatch(value.value) is None:
        report.warning(
            "W0201",
            f"version `{value.value}` is not semantic (MAJOR.MINOR.PATCH)",
            value.span,
            help="use a version such as `1.0.0`; the runtime orders versions semantically",
        )


def check_contracts(
    declarations: Declarations, types: TypeResolver, report: Reporter
) -> dict[str, Contract]:
    return {
        name: _contract(task, declarations, types, report)
        for name, task in declarations.tasks.items()
    }


def _contract(
    task: ast.Task, declarations: Declarations, types: TypeResolver, report: Reporter
) -> Contract:
    members: dict[type, ast.TaskMember] = {}
    for member in task.members:
        first = members.get(type(member))
        if first is not None and isinstance(member, ast.Effect):
            report.error(
                "E1001",
                "duplicate `effect`: a task has one effect class",
                member.keyword,
                labels=[first_declared(first.keyword)],
                help="keep one `effect` clause",
            )
            continue
        if first is not None:
            duplicate_member(report, _TASK_WORDS[type(member)], member.keyword, first.keyword)
            continue
        members[type(member)] = member
    version = DEFAULT_VERSION
    declared = members.get(ast.Version)
    if isinstance(declared, ast.Version):
        version = declared.value.value
        check_version(declared.value, report)
    input_type: IRType = EMPTY_RECORD
    output_type: IRType = EMPTY_RECORD
    given = members.get(ast.TaskInput)
    if isinstance(given, ast.TaskInput):
        input_type = _record(given.type, "input", types, report)
    returned = members.get(ast.TaskOutput)
    if isinstance(returned, ast.TaskOutput):
        output_type = _record(returned.type, "output", types, report)
    compensated_by = None
    undo = members.get(ast.CompensatedBy)
    if isinstance(undo, ast.CompensatedBy):
        target = undo.task.value
        if target in declarations.tasks:
            compensated_by = target
        else:
            report.error(
                "E0316",
                f"`compensated_by` names unknown task `{target}`",
                undo.task.span,
                help=did_you_mean(target, declarations.tasks)
                or "declare the task, or import the file that declares it",
            )
    effect = _effect(members.get(ast.Effect), report)
    ir = TaskContract(task.name.value, version, input_type, output_type, compensated_by, effect)
    return Contract(task, ir)


def _effect(member: ast.TaskMember | None, report: Reporter) -> str | None:
    if not isinstance(member, ast.Effect):
        return None
    word = member.effect_class
    if word.name in EFFECT_CLASSES:
        return word.name
    report.error(
        "E1000",
        f"unknown effect class `{word.name}`",
        word.span,
        help=did_you_mean(word.name, EFFECT_CLASSES)
        or "the effect classes are `idempotent`, `compensable`, `once` and `pure`",
    )
    return None


def _record(node: ast.TypeExpr, which: str, types: TypeResolver, report: Reporter) -> IRType:
    before = len(report.diagnostics)
    resolved = types.resolve(node)
    if isinstance(resolved, RecordType) or resolved == JSON:
        return resolved
    if len(report.diagnostics) == before:
        report.error(
            "E0310",
            f"task {which} must be a record type, found `{render(resolved)}`",
            node.span,
        )
    return JSON
