"""Hover, definition, completion and outline over an `Analysis`.

What the cursor stands on is read from the text around it (a dotted path
such as `charge.card.last4`, a word, or a string after `worker`, `workflow`,
`compensated_by` or `import`) and resolved against the checked program:
step output types come from the checker (`CheckedWorkflow.step_types`), the
workflow input from its IR definition, and fields are followed along the
path through records, optionals and schemas. Nothing here raises on what a
user typed; an unknown name answers nothing.

Positions: LSP columns count UTF-16 code units, ORBIT spans count code
points; `to_offset` and `span_range` convert between them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from lsprotocol import types as lsp

from orbit_cli.lsp.workspace import Analysis
from orbit_core.ir.types import (
    ListType,
    MapType,
    OptionalType,
    Primitive,
    RecordType,
    Type,
    render_type,
)
from orbit_lang import ast
from orbit_lang.check.builtins import SIGNATURES
from orbit_lang.source import Span

# The IR's types (the checker's own `null` type never reaches a step's output).
IR_TYPES = (Primitive, ListType, MapType, OptionalType, RecordType)

KEYWORDS: dict[str, str] = {
    "import": "Loads the declarations of another `.orbit` file, relative to this one.",
    "schema": "A named record type, usable wherever a type is expected.",
    "task": "A task contract: the typed input and output a worker implements.",
    "workflow": 'A durable workflow; inside a step, `workflow "Name"` runs a child workflow.',
    "test": "A test run by `orbit test` against mocked tasks.",
    "version": "The semantic version of a task or workflow.",
    "description": "A one-line description shown by `orbit docs`.",
    "input": "The input record; in expressions, the workflow's input value.",
    "output": "The output type of a task or workflow.",
    "compensated_by": "The task that undoes this one when a saga compensates.",
    "effect": "What running the task again does: `idempotent`, `compensable`, `once` or `pure`.",
    "step": "A unit of work; its name is its output value in later expressions.",
    "worker": "Runs the step on a worker that implements the named task.",
    "sleep": "A durable timer: the step finishes after the duration.",
    "await": "Waits for the named signal and yields its payload.",
    "compute": "Evaluates an expression in the engine, with no worker.",
    "using": "The language of the worker expected to run the task.",
    "after": "Orders this step after the named steps.",
    "with": "The input passed to the task or child workflow.",
    "timeout": "How long one attempt (or the whole workflow) may take.",
    "queue_timeout": "How long the task may wait for a worker to claim it.",
    "retry": "The retry policy: attempts and back-off.",
    "idempotency_key": "A key that lets the worker recognise a repeated attempt.",
    "when": "A condition: the step is skipped when it is false.",
    "for": "Fans the step out over the items of a list.",
    "in": "Separates the loop variable from the list it walks.",
    "max_parallel": "How many items of a fan-out run at the same time.",
    "compensate": "Steps run to undo this step when the workflow compensates.",
    "signal": "A named, typed message the workflow can receive.",
    "query": "A named expression read from a running execution.",
    "return": "The workflow's output expression.",
    "continue_as_new": "Finishes this run and starts a fresh one with new input.",
    "limits": "Bounds on the execution (steps, history, fan-out).",
    "retention": "How long a finished execution stays in the database (--retention servers).",
    "on": "A handler run when the workflow fails, is cancelled or gets an event.",
    "mock": "Replaces a task's worker in a test.",
    "expect": "An assertion on the outcome of a test run.",
    "if": "A conditional expression: `if c then a else b`.",
    "then": "The value of an `if` when its condition holds.",
    "else": "The value of an `if` when its condition does not hold.",
    "true": "The Bool literal true.",
    "false": "The Bool literal false.",
    "null": "The absent value of an optional type.",
}
TYPES = (
    "String",
    "Int",
    "Float",
    "Bool",
    "Bytes",
    "Duration",
    "Timestamp",
    "UUID",
    "Json",
    "List",
    "Map",
)

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATH_BEFORE = re.compile(
    r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\.([A-Za-z0-9_]*)$"
)
_STRING_BEFORE = re.compile(r"\b(worker|workflow|compensated_by|mock|import|task)\s+\"([^\"]*)$")
_STRING_AT = re.compile(r"\b(worker|workflow|compensated_by|mock|import|task)\s+\"([^\"\n]*)\"")


# -- positions ---------------------------------------------------------------


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def to_offset(text: str, position: lsp.Position) -> int:
    """The code-point offset of an LSP position (clamped to the text)."""
    line_start = 0
    for _ in range(max(0, position.line)):
        found = text.find("\n", line_start)
        if found == -1:
            return len(text)
        line_start = found + 1
    end = text.find("\n", line_start)
    line = text[line_start : len(text) if end == -1 else end]
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return line_start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return line_start + len(line)


def _units(text: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def position_of(text: str, offset: int) -> lsp.Position:
    offset = max(0, min(offset, len(text)))
    line_start = text.rfind("\n", 0, offset) + 1
    return lsp.Position(line=text.count("\n", 0, offset), character=_units(text[line_start:offset]))


def span_range(span: Span | None, text: str | None = None) -> lsp.Range:
    """The LSP range of a span; with the file's text, columns in UTF-16 units."""
    if span is None:
        return lsp.Range(lsp.Position(line=0, character=0), lsp.Position(line=0, character=0))
    if text is not None and span.end <= len(text):
        return lsp.Range(position_of(text, span.start), position_of(text, span.end))
    return lsp.Range(
        lsp.Position(line=span.line - 1, character=span.column - 1),
        lsp.Position(line=span.end_line - 1, character=span.end_column - 1),
    )


# -- walking the tree ----------------------------------------------------------


def steps_of(workflow: ast.Workflow) -> Iterator[tuple[str, ast.Step]]:
    """Every step with the key `step_types` knows it by."""
    for member in workflow.members:
        if isinstance(member, ast.Step):
            yield member.name.name, member
        elif isinstance(member, ast.OutcomeHandler):
            for step in member.steps:
                yield f"on_{member.kind.name}:{step.name.name}", step
        elif isinstance(member, ast.EventHandler):
            for step in member.steps:
                yield f"on_event:{member.signal.name}:{step.name.name}", step


def _enclosing_workflow(analysis: Analysis, offset: int, line: int) -> ast.Workflow | None:
    module = analysis.module
    if module is None:
        return None
    same_text = analysis.text
    for declaration in module.declarations:
        if not isinstance(declaration, ast.Workflow):
            continue
        span = declaration.span
        if same_text and span.start <= offset <= span.end:
            return declaration
    # The text changed since the analysis: fall back to lines.
    for declaration in module.declarations:
        if (
            isinstance(declaration, ast.Workflow)
            and declaration.span.line - 1 <= line <= declaration.span.end_line - 1
        ):
            return declaration
    return None


def _step(workflow: ast.Workflow, name: str) -> tuple[str, ast.Step] | None:
    found = None
    for key, step in steps_of(workflow):
        if step.name.name == name:
            if key == name:
                return key, step
            found = found or (key, step)
    return found


def _strip(t: Type) -> Type:
    while isinstance(t, OptionalType):
        t = t.type
    return t


def _field(t: Type, name: str) -> Type | None:
    t = _strip(t)
    if isinstance(t, RecordType):
        found = t.field(name)
        return found.type if found is not None else None
    return None


def _root_type(analysis: Analysis, workflow: ast.Workflow | None, name: str) -> Type | None:
    if workflow is None:
        return None
    checked = analysis.checked(workflow)
    if checked is None:
        return None
    if name == "input":
        return checked.definition.input
    step = _step(workflow, name)
    if step is not None:
        found = checked.step_types.get(step[0])
        return found if isinstance(found, IR_TYPES) else None
    return None


def _path_type(analysis: Analysis, workflow: ast.Workflow | None, parts: list[str]) -> Type | None:
    t = _root_type(analysis, workflow, parts[0])
    for part in parts[1:]:
        if t is None:
            return None
        t = _field(t, part)
    return t


def _describe(t: Type) -> str:
    """A type in source spelling; a record also lists its fields."""
    t0 = _strip(t)
    if isinstance(t0, RecordType) and t0.fields:
        fields = "\n".join(f"    {f.name}: {render_type(f.type)}" for f in t0.fields)
        head = render_type(t) if t0.name else ""
        body = "{\n" + fields + "\n}"
        return f"{head} {body}".strip()
    return render_type(t)


def _code(text: str) -> str:
    return f"```orbit\n{text}\n```"


# -- what is under the cursor ------------------------------------------------


def _word_at(text: str, offset: int) -> tuple[int, int] | None:
    start = offset
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    end = offset
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    if start == end or not _WORD.fullmatch(text[start:end]):
        return None
    return start, end


def _dotted_before(text: str, start: int) -> list[str]:
    """The names before `.name` ending at `start`: `a.b` for the `c` of `a.b.c`."""
    parts: list[str] = []
    position = start
    while position > 0 and text[position - 1] == ".":
        end = position - 1
        begin = end
        while begin > 0 and (text[begin - 1].isalnum() or text[begin - 1] == "_"):
            begin -= 1
        if begin == end:
            break
        parts.insert(0, text[begin:end])
        position = begin
    return parts


def _string_at(text: str, offset: int) -> tuple[str, str, int, int] | None:
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    line = text[line_start : len(text) if line_end == -1 else line_end]
    for match in _STRING_AT.finditer(line):
        start, end = line_start + match.start(2) - 1, line_start + match.end(2) + 1
        if start <= offset <= end:
            return match.group(1), match.group(2), start, end
    return None


# -- hover -------------------------------------------------------------------


def _task_hover(analysis: Analysis, task: ast.Task) -> str:
    lines = [f'task "{task.name.value}"']
    for member in task.members:
        if isinstance(member, ast.Version):
            lines.append(f'    version "{member.value.value}"')
        elif isinstance(member, ast.TaskInput):
            lines.append(f"    input {_source(analysis, member.type)}")
        elif isinstance(member, ast.TaskOutput):
            lines.append(f"    output {_source(analysis, member.type)}")
        elif isinstance(member, ast.CompensatedBy):
            lines.append(f'    compensated_by "{member.task.value}"')
        elif isinstance(member, ast.Effect):
            lines.append(f"    effect {member.effect_class.name}")
    return _code("\n".join(lines)) + (f"\n\n{task.doc}" if task.doc else "")


def _source(analysis: Analysis, node: ast.TypeExpr) -> str:
    """A type as written, on one line."""
    source = analysis.program.sources.get(node.span.file)
    if source is None:
        return "…"
    return " ".join(source.text[node.span.start : node.span.end].split())


def _workflow_hover(analysis: Analysis, workflow: ast.Workflow) -> str:
    checked = analysis.checked(workflow)
    head = f"workflow {workflow.name.name}"
    if checked is not None:
        definition = checked.definition
        head += (
            f'\n    version "{definition.version}"'
            f"\n    input {_describe(definition.input)}"
            f"\n    output {_describe(definition.output)}"
        )
    return _code(head) + (f"\n\n{workflow.doc}" if workflow.doc else "")


def _schema_hover(analysis: Analysis, schema: ast.Schema) -> str:
    return _code(f"schema {schema.name.name} {_source(analysis, schema.record)}") + (
        f"\n\n{schema.doc}" if schema.doc else ""
    )


def hover(analysis: Analysis, text: str, position: lsp.Position) -> lsp.Hover | None:
    offset = to_offset(text, position)
    value = _hover_text(analysis, text, offset, position.line)
    if value is None:
        return None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=value))


def _hover_string(analysis: Analysis, keyword: str, name: str) -> str | None:
    if keyword in ("worker", "compensated_by", "mock", "task"):
        task = analysis.task(name)
        return _task_hover(analysis, task) if task is not None else None
    if keyword == "workflow":
        workflow = analysis.workflow(name)
        return _workflow_hover(analysis, workflow) if workflow is not None else None
    return None


def _hover_text(analysis: Analysis, text: str, offset: int, line: int) -> str | None:
    string = _string_at(text, offset)
    if string is not None:
        return _hover_string(analysis, string[0], string[1])
    word = _word_at(text, offset)
    if word is None:
        return None
    start, end = word
    name = text[start:end]
    workflow = _enclosing_workflow(analysis, offset, line)
    before = _dotted_before(text, start)
    if before:
        t = _path_type(analysis, workflow, [*before, name])
        if t is not None:
            return _code(f"{'.'.join([*before, name])}: {_describe(t)}")
        return None
    if workflow is not None:
        step = _step(workflow, name)
        if step is not None:
            t = _root_type(analysis, workflow, name)
            detail = f"step {name}: {_describe(t)}" if t is not None else f"step {name}"
            return _code(detail) + (f"\n\n{step[1].doc}" if step[1].doc else "")
        after = text[end : end + 1]
        if name == "input" and after == ".":
            t = _root_type(analysis, workflow, "input")
            return _code(f"input: {_describe(t)}") if t is not None else None
    return _hover_name(analysis, name, text[end : end + 1] == "(")


def _hover_name(analysis: Analysis, name: str, called: bool) -> str | None:
    """A name that is not a step or a path: a built-in, schema, workflow,
    keyword or type."""
    if name in SIGNATURES and called:
        return _code(SIGNATURES[name])
    schema = analysis.schema(name)
    if schema is not None:
        return _schema_hover(analysis, schema)
    other = analysis.workflow(name)
    if other is not None:
        return _workflow_hover(analysis, other)
    if name in KEYWORDS:
        return f"**{name}**: {KEYWORDS[name]}"
    if name in SIGNATURES:
        return _code(SIGNATURES[name])
    if name in TYPES:
        return f"**{name}**: a built-in type."
    return None


# -- definition ----------------------------------------------------------------


def definition(analysis: Analysis, text: str, position: lsp.Position) -> tuple[Span, str] | None:
    """The span (and the file it is in) of what the cursor names."""
    offset = to_offset(text, position)
    string = _string_at(text, offset)
    if string is not None:
        keyword, name = string[0], string[1]
        target: ast.Task | ast.Workflow | None = None
        if keyword in ("worker", "compensated_by", "mock"):
            target = analysis.task(name)
        elif keyword == "workflow":
            target = analysis.workflow(name)
        elif keyword == "import":
            module = analysis.module
            for m in analysis.program.modules:
                if module is not None and _imports(module, name, m.path):
                    return m.span, m.path
            return None
        return (target.span, target.span.file) if target is not None else None
    word = _word_at(text, offset)
    if word is None:
        return None
    name = text[word[0] : word[1]]
    workflow = _enclosing_workflow(analysis, offset, position.line)
    if workflow is not None and not _dotted_before(text, word[0]):
        step = _step(workflow, name)
        if step is not None:
            return step[1].span, step[1].span.file
    schema = analysis.schema(name)
    if schema is not None:
        return schema.span, schema.span.file
    other = analysis.workflow(name)
    if other is not None:
        return other.span, other.span.file
    return None


def _imports(module: ast.Module, written: str, path: str) -> bool:
    for d in module.declarations:
        if isinstance(d, ast.Import) and d.path.value == written:
            joined = os.path.normpath(os.path.join(os.path.dirname(module.path), written))
            return joined == path
    return False


# -- completion ----------------------------------------------------------------


def completion(
    analysis: Analysis | None, text: str, position: lsp.Position
) -> list[lsp.CompletionItem]:
    offset = to_offset(text, position)
    line_start = text.rfind("\n", 0, offset) + 1
    before = text[line_start:offset]
    if analysis is None:
        return _general(None, None)
    quoted = _STRING_BEFORE.search(before)
    if quoted is not None:
        keyword = quoted.group(1)
        if keyword in ("worker", "compensated_by", "mock"):
            return [
                lsp.CompletionItem(
                    label=d.name.value,
                    kind=lsp.CompletionItemKind.Interface,
                    detail="task",
                    documentation=d.doc,
                )
                for d in analysis.declarations()
                if isinstance(d, ast.Task)
            ]
        if keyword == "workflow":
            return [
                lsp.CompletionItem(label=d.name.name, kind=lsp.CompletionItemKind.Module)
                for d in analysis.declarations()
                if isinstance(d, ast.Workflow)
            ]
        return []
    workflow = _enclosing_workflow(analysis, offset, position.line)
    dotted = _PATH_BEFORE.search(before)
    if dotted is not None:
        t = _path_type(analysis, workflow, dotted.group(1).split("."))
        t = _strip(t) if t is not None else None
        if isinstance(t, ListType):
            return []
        if isinstance(t, RecordType):
            return [
                lsp.CompletionItem(
                    label=f.name, kind=lsp.CompletionItemKind.Field, detail=render_type(f.type)
                )
                for f in t.fields
            ]
        return []
    return _general(analysis, workflow)


def _general(analysis: Analysis | None, workflow: ast.Workflow | None) -> list[lsp.CompletionItem]:
    items = [
        lsp.CompletionItem(label=k, kind=lsp.CompletionItemKind.Keyword, detail=v)
        for k, v in KEYWORDS.items()
    ]
    items += [lsp.CompletionItem(label=t, kind=lsp.CompletionItemKind.TypeParameter) for t in TYPES]
    items += [
        lsp.CompletionItem(label=name, kind=lsp.CompletionItemKind.Function, detail=signature)
        for name, signature in SIGNATURES.items()
    ]
    if analysis is not None:
        items += [
            lsp.CompletionItem(
                label=d.name.name, kind=lsp.CompletionItemKind.Struct, detail="schema"
            )
            for d in analysis.declarations()
            if isinstance(d, ast.Schema)
        ]
    if workflow is not None:
        items += [
            lsp.CompletionItem(
                label=s.name.name, kind=lsp.CompletionItemKind.Variable, detail="step"
            )
            for _, s in steps_of(workflow)
        ]
    return items


# -- outline -------------------------------------------------------------------


def symbols(analysis: Analysis) -> list[lsp.DocumentSymbol]:
    module = analysis.module
    if module is None:
        return []
    text = analysis.text

    def symbol(
        node: Any,
        name: str,
        kind: lsp.SymbolKind,
        detail: str,
        children: list[lsp.DocumentSymbol] | None = None,
    ) -> lsp.DocumentSymbol:
        return lsp.DocumentSymbol(
            name=name,
            kind=kind,
            range=span_range(node.span, text),
            selection_range=span_range(node.name.span, text),
            detail=detail,
            children=children,
        )

    result = []
    for d in module.declarations:
        if isinstance(d, ast.Workflow):
            steps = [
                symbol(step, step.name.name, lsp.SymbolKind.Method, "step")
                for _, step in steps_of(d)
            ]
            result.append(symbol(d, d.name.name, lsp.SymbolKind.Class, "workflow", steps))
        elif isinstance(d, ast.Schema):
            result.append(symbol(d, d.name.name, lsp.SymbolKind.Struct, "schema"))
        elif isinstance(d, ast.Task):
            result.append(symbol(d, d.name.value, lsp.SymbolKind.Interface, "task"))
    return result
