"""The reference pages of `orbit docs` (chapter 56): an index, one page per
workflow and one page of task contracts, as Markdown or self-contained HTML.

Pages are built once as a small document model (headings, paragraphs,
tables, code blocks, raw HTML) whose text is inline Markdown (code spans and
links), and then written by one of two renderers, so the two formats always
carry the same content. The HTML renderer turns code spans and links into
tags and escapes everything else, so a doc comment cannot inject markup.

Everything comes from the compiled definitions (their `source_map` holds
positions and `///` doc comments) and from `orbit_lang.catalog` for the task
contracts no workflow uses; expressions are printed back from the IR, and
the diagram is `orbit graph`'s own output.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from orbit_cli import graph
from orbit_core.flow.text import flow_parts
from orbit_core.ir import ChildContract, Definition, Step, TaskContract
from orbit_core.ir import expr as e
from orbit_core.ir.printer import render_expr
from orbit_core.ir.types import (
    NO_DEFAULT,
    Field,
    ListType,
    MapType,
    OptionalType,
    RecordType,
    Type,
    render_type,
)

# --- document model ------------------------------------------------------------


@attrs.frozen
class Heading:
    level: int
    text: str


@attrs.frozen
class Para:
    text: str


@attrs.frozen
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@attrs.frozen
class Code:
    language: str
    text: str


@attrs.frozen
class Anchor:
    id: str


@attrs.frozen
class Diagram:
    """Markdown shows the Mermaid source; HTML the SVG and, folded, the source."""

    mermaid: str
    svg: str


Block = Heading | Para | Table | Code | Anchor | Diagram


@attrs.frozen
class Page:
    name: str  # file name without extension
    title: str
    blocks: tuple[Block, ...]


@attrs.frozen
class Contract:
    """A task contract with where it was declared (None for a built-in task)."""

    ir: TaskContract
    file: str | None
    line: int | None
    doc: str | None
    description: str | None
    fields: dict[str, Any]


# --- inline helpers ----------------------------------------------------------------


def code(text: str) -> str:
    """A Markdown code span that survives backticks in the text."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def anchor(task: str) -> str:
    return "task-" + re.sub(r"[^A-Za-z0-9]", "-", task)


def task_link(task: str, ext: str) -> str:
    return f"[{code(task)}](contracts.{ext}#{anchor(task)})"


def one_line(doc: str | None) -> str:
    """A doc comment for a table cell: its lines joined with spaces."""
    if not doc:
        return ""
    return " ".join(line.strip() for line in doc.splitlines() if line.strip())


def paragraphs(doc: str | None) -> list[Block]:
    if not doc:
        return []
    return [Para(p.strip()) for p in re.split(r"\n\s*\n", doc) if p.strip()]


def json_literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# --- field tables ----------------------------------------------------------------


def _fields_of(t: Type) -> tuple[RecordType | None, str]:
    """The record a type holds (through `?`, List and Map) and the path suffix."""
    suffix = ""
    while True:
        if isinstance(t, OptionalType):
            t = t.type
        elif isinstance(t, ListType):
            t, suffix = t.items, suffix + "[]"
        elif isinstance(t, MapType):
            t, suffix = t.values, suffix + "{}"
        else:
            return (t if isinstance(t, RecordType) else None), suffix


class FieldDocs:
    """Doc comments of fields: inline records from a position tree, named
    schemas from the definitions' source maps."""

    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas

    def rows(
        self, record: Type, positions: dict[str, Any] | None, *, with_required: bool
    ) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        if isinstance(record, RecordType):
            self._walk(record, positions, "", with_required=with_required, found=found, seen=set())
        return found

    def _walk(
        self,
        record: RecordType,
        positions: dict[str, Any] | None,
        prefix: str,
        *,
        with_required: bool,
        found: list[tuple[str, ...]],
        seen: set[str],
    ) -> None:
        if positions is None and record.name is not None:
            positions = self.schemas.get(record.name, {}).get("fields")
        for field in record.fields:
            path = prefix + field.name
            position = (positions or {}).get(field.name, {})
            found.append(_field_row(field, path, one_line(position.get("doc")), with_required))
            inner, suffix = _fields_of(field.type)
            if inner is not None and inner.name not in seen:
                nested = seen | ({inner.name} if inner.name else set())
                child_positions = position.get("fields") if inner.name is None else None
                self._walk(
                    inner,
                    child_positions,
                    f"{path}{suffix}.",
                    with_required=with_required,
                    found=found,
                    seen=nested,
                )


def _field_row(field: Field, path: str, doc: str, with_required: bool) -> tuple[str, ...]:
    type_text = code(render_type(field.type))
    if not with_required:
        return (code(path), type_text, doc)
    # As the runtime checks it: a JSON field may be null, so it may be absent.
    optional = isinstance(field.type, OptionalType) or render_type(field.type) == "JSON"
    required = "no" if optional or field.has_default else "yes"
    default = code(json_literal(field.default)) if field.default is not NO_DEFAULT else ""
    return (code(path), type_text, required, default, doc)


def fields_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> Block:
    """A field table, or a sentence for a record without fields."""
    return Table(header, tuple(rows)) if rows else Para("No fields.")


INPUT_HEADER = ("Field", "Type", "Required", "Default", "Description")
OUTPUT_HEADER = ("Field", "Type", "Description")


# --- workflow pages --------------------------------------------------------------


class Builder:
    def __init__(
        self,
        definitions: Sequence[Definition],
        contracts: Sequence[Contract],
        ext: str,
        schema_links: dict[str, list[tuple[str, str]]] | None,
        envelope: bool = False,
    ) -> None:
        self.definitions = list(definitions)
        # `orbit docs --envelope` (issue 44): off by default, so the book's
        # pages stay as chapter 56 prints them.
        self.envelope = envelope
        self.contracts = list(contracts)
        self.ext = ext
        self.schema_links = schema_links
        schemas: dict[str, Any] = {}
        for definition in self.definitions:
            for name, position in definition.source_map.get("schemas", {}).items():
                schemas.setdefault(name, position)
        self.field_docs = FieldDocs(schemas)
        self.workflow_names = {d.name for d in self.definitions}

    # -- steps
    def action(self, definition: Definition, step: Step) -> str:
        if step.kind == "task" and step.task is not None:
            contract = definition.contracts.get(step.task)
            version = f"@{contract.version}" if contract is not None else ""
            text = f"{task_link(step.task, self.ext)}{version}"
            if step.using:
                text += f" using {code(step.using)}"
        elif step.kind == "workflow" and step.workflow is not None:
            name = step.workflow
            target = (
                f"[{code(name)}]({name}.{self.ext})" if name in self.workflow_names else code(name)
            )
            text = f"child workflow {target}"
        elif step.kind == "sleep":
            text = code(f"sleep {graph.duration(step.sleep_ms or 0)}")
        elif step.kind == "await":
            text = code(f"await {step.signal}")
        else:
            text = "compute " + code(render_expr(step.compute or e.Null()))
        if step.for_each is not None:
            fan = f"for each {code(step.for_each.var)} in {code(render_expr(step.for_each.over))}"
            if step.max_parallel is not None:
                fan += f", max_parallel {step.max_parallel}"
            text += f"; {fan}"
        for part in flow_parts(step.flow):
            text += f"; {code(part)}"
        return text

    def steps_table(
        self, definition: Definition, steps: Sequence[Step], docs: dict[str, Any]
    ) -> Table:
        rows = []
        for step in steps:
            after = ", ".join(code(d) for d in sorted(set(step.depends_on)))
            when = code(render_expr(step.when)) if step.when is not None else ""
            retry = []
            if step.retry is not None and step.retry.attempts > 1:
                retry.append(graph.retry_text(step.retry))
                if step.retry.non_retryable:
                    retry.append(
                        "non-retryable " + ", ".join(code(c) for c in step.retry.non_retryable)
                    )
            if step.idempotency_key is not None:
                retry.append(f"idempotency key {code(render_expr(step.idempotency_key))}")
            undo = ""
            if step.compensate is not None:
                contract = definition.contracts.get(step.compensate.task)
                version = f"@{contract.version}" if contract is not None else ""
                undo = task_link(step.compensate.task, self.ext) + version
            rows.append(
                (
                    code(step.name),
                    self.action(definition, step),
                    after,
                    when,
                    "; ".join(retry),
                    graph.timeouts_text(step) or "",
                    undo,
                    one_line(docs.get(step.name, {}).get("doc")),
                )
            )
        header = (
            "Step",
            "Action",
            "After",
            "When",
            "Retry",
            "Timeouts",
            "Compensation",
            "Description",
        )
        return Table(header, tuple(rows))

    def workflow_page(self, definition: Definition) -> Page:
        smap = definition.source_map
        blocks: list[Block] = [Heading(1, f"Workflow {code(definition.name)}")]
        blocks += paragraphs(smap.get("doc"))
        if definition.description:
            blocks.append(Para(definition.description))
        source = f"{smap['file']}:{smap['line']}" if "file" in smap else "unknown"
        timeout = code(graph.duration(definition.timeout_ms)) if definition.timeout_ms else "none"
        limits = (
            ", ".join(f"{code(n)} {v}" for n, v in sorted(definition.limits.items()))
            if definition.limits
            else "server defaults"
        )
        facts: tuple[tuple[str, str], ...] = (
            ("Version", code(definition.version)),
            ("Definition hash", code(definition.definition_hash)),
            ("IR version", code(definition.ir_version)),
            ("Source", code(source)),
            ("Workflow timeout", timeout),
            ("Limits", limits),
        )
        flow = flow_parts(definition.flow)
        if flow:  # (a row only when declared: pages without flow control are unchanged)
            facts += (("Flow control", "; ".join(code(part) for part in flow)),)
        blocks.append(Table(("", ""), facts))
        blocks.append(Heading(2, "Input"))
        blocks.append(
            fields_table(
                INPUT_HEADER,
                self.field_docs.rows(definition.input, smap.get("input"), with_required=True),
            )
        )
        blocks.append(Heading(2, "Output"))
        if isinstance(definition.output, RecordType):
            rows = self.field_docs.rows(definition.output, smap.get("output"), with_required=False)
            blocks.append(fields_table(OUTPUT_HEADER, rows))
        else:
            blocks.append(Para(f"Type {code(render_type(definition.output))}."))
        blocks.append(Code("orbit", f"return {render_expr(definition.result)}"))
        blocks += self.signals(definition)
        blocks += self.queries(definition)
        blocks += self.search_fields(definition)
        blocks.append(Heading(2, "Steps"))
        blocks.append(
            Para(
                "In execution order. `After` lists direct dependencies, including those"
                " implied by reading another step's output."
            )
        )
        blocks.append(self.steps_table(definition, definition.steps, smap.get("steps", {})))
        blocks += self.continue_as_new(definition)
        handlers = [
            (k, definition.handlers[k])
            for k in ("failure", "cancel", "timeout")
            if definition.handlers.get(k)
        ]
        if handlers:
            blocks.append(Heading(2, "Outcome handlers"))
            for kind, steps in handlers:
                blocks.append(Heading(3, code(f"on {kind}")))
                docs = smap.get("handlers", {}).get(kind, {})
                blocks.append(self.steps_table(definition, steps, docs))
        if definition.events:
            blocks.append(Heading(2, "Event handlers"))
            for event in sorted(definition.events, key=lambda ev: ev.signal):
                blocks.append(Heading(3, code(f"on event {event.signal}")))
                docs = smap.get("events", {}).get(event.signal, {})
                blocks.append(self.steps_table(definition, event.steps, docs))
        blocks.append(Heading(2, "Diagram"))
        from orbit_cli.graph_svg import svg
        from orbit_cli.graph_text import mermaid

        blocks.append(Diagram(mermaid(definition), svg(definition)))
        blocks += self.contracts_used(definition)
        if self.envelope:
            blocks += envelope_section(definition)
        if self.schema_links is not None:
            blocks.append(Heading(2, "JSON Schema"))
            links = tuple(
                (label, f"[{code(file)}](schemas/{file})")
                for label, file in self.schema_links.get(definition.name, [])
            )
            blocks.append(Table(("Payload", "Schema"), links))
        return Page(definition.name, f"Workflow {definition.name}", tuple(blocks))

    def signals(self, definition: Definition) -> Iterator[Block]:
        if not definition.signals:
            return
        smap = definition.source_map.get("signals", {})
        yield Heading(2, "Signals")
        for signal in definition.signals:
            position = smap.get(signal.name, {})
            yield Heading(3, f"Signal {code(signal.name)}")
            yield from paragraphs(position.get("doc"))
            awaiting = [
                s.name for s in definition.steps if s.kind == "await" and s.signal == signal.name
            ]
            for steps in definition.handlers.values():
                awaiting += [s.name for s in steps if s.kind == "await" and s.signal == signal.name]
            receivers = [code(name) for name in awaiting]
            if any(ev.signal == signal.name for ev in definition.events):
                receivers.append(code(f"on event {signal.name}"))
            if receivers:
                yield Para(f"Received by {', '.join(receivers)}.")
            rows = self.field_docs.rows(signal.payload, position.get("fields"), with_required=True)
            yield fields_table(INPUT_HEADER, rows)

    def queries(self, definition: Definition) -> Iterator[Block]:
        if not definition.queries:
            return
        smap = definition.source_map.get("queries", {})
        yield Heading(2, "Queries")
        rows = tuple(
            (
                code(q.name),
                code(render_type(q.type)),
                code(render_expr(q.expr)),
                one_line(smap.get(q.name, {}).get("doc")),
            )
            for q in definition.queries
        )
        yield Table(("Query", "Type", "Expression", "Description"), rows)

    def search_fields(self, definition: Definition) -> Iterator[Block]:
        """The `search` block (docs/language/visibility.md): what
        `orbit ps --where` can filter this workflow's executions by."""
        if not definition.search:
            return
        yield Heading(2, "Search fields")
        yield Para("Filter executions by these with `orbit ps --where`.")
        rows = tuple(
            (code(f.name), code(render_type(f.type)), code(render_expr(f.expr)))
            for f in definition.search
        )
        yield Table(("Field", "Type", "Expression"), rows)

    def continue_as_new(self, definition: Definition) -> Iterator[Block]:
        can = definition.continue_as_new
        if can is None:
            return
        yield Heading(2, "Continue-as-new")
        outcome = (
            "the run ends with status `CONTINUED_AS_NEW` and the execution continues as a new"
            " run, under the same id, with the input below and an empty history."
        )
        if can.when is not None:
            yield Para(
                f"When every step has finished and {code(render_expr(can.when))} is true, "
                f"{outcome} Otherwise the run completes with `return`."
            )
        else:
            yield Para(
                f"When every step has finished, {outcome} The execution always continues"
                " and never completes by itself."
            )
        if isinstance(can.with_, e.Object):
            given = {entry.key: entry.value for entry in can.with_.entries}
            rows = []
            for field in definition.input.fields:
                if field.name in given:
                    value = code(render_expr(given.pop(field.name)))
                elif field.has_default:
                    value = f"default {code(json_literal(field.default))}"
                else:
                    value = code("null")
                rows.append((code(field.name), value))
            rows += [(code(k), code(render_expr(v))) for k, v in given.items()]
            yield Table(("Next run's input", "Value"), tuple(rows))
        else:
            yield Code("orbit", f"continue_as_new with {render_expr(can.with_)}")

    def contracts_used(self, definition: Definition) -> Iterator[Block]:
        tasks = [c for c in definition.contracts.values() if isinstance(c, TaskContract)]
        children = [c for c in definition.contracts.values() if isinstance(c, ChildContract)]
        if tasks:
            yield Heading(2, "Task contracts used")
            rows = tuple(
                (
                    task_link(c.name, self.ext),
                    code(c.version),
                    code(render_type(c.input)),
                    code(render_type(c.output)),
                    task_link(c.compensated_by, self.ext) if c.compensated_by else "",
                )
                for c in sorted(tasks, key=lambda c: c.name)
            )
            yield Table(("Task", "Version", "Input", "Output", "Compensated by"), rows)
        if children:
            yield Heading(2, "Child workflows")
            child_rows = tuple(
                (
                    f"[{code(c.name)}]({c.name}.{self.ext})"
                    if c.name in self.workflow_names
                    else code(c.name),
                    code(c.version),
                    code(c.definition_hash),
                )
                for c in sorted(children, key=lambda c: c.name)
            )
            yield Table(("Workflow", "Version", "Definition hash"), child_rows)

    # -- contracts and index
    def contracts_page(self) -> Page:
        blocks: list[Block] = [
            Heading(1, "Task contracts"),
            Para(
                "The typed interfaces that workers implement. Every step that calls a task"
                " is checked against its contract."
            ),
        ]
        for contract in self.contracts:
            c = contract.ir
            blocks.append(Anchor(anchor(c.name)))
            blocks.append(Heading(2, code(c.name)))
            blocks += paragraphs(contract.doc)
            if contract.description:
                blocks.append(Para(contract.description))
            users = [
                f"[{code(d.name)}]({d.name}.{self.ext})"
                for d in self.definitions
                if c.name in d.contracts
                or any(s.compensate is not None and s.compensate.task == c.name for s in d.steps)
            ]
            facts = [("Version", code(c.version))]
            if c.compensated_by:
                facts.append(("Compensated by", task_link(c.compensated_by, self.ext)))
            if c.effect is not None:
                facts.append(("Effect", code(c.effect)))
            source = code(f"{contract.file}:{contract.line}") if contract.file else "built-in"
            facts.append(("Source", source))
            facts.append(("Used by", ", ".join(users) or "no workflow"))
            blocks.append(Table(("", ""), tuple(facts)))
            blocks.append(Heading(3, "Input"))
            blocks.append(self._contract_fields(c.input, contract.fields.get("input"), True))
            blocks.append(Heading(3, "Output"))
            blocks.append(self._contract_fields(c.output, contract.fields.get("output"), False))
        return Page("contracts", "Task contracts", tuple(blocks))

    def _contract_fields(self, t: Type, positions: Any, with_required: bool) -> Block:
        if not isinstance(t, RecordType):
            return Para(f"Type {code(render_type(t))}.")
        header = INPUT_HEADER if with_required else OUTPUT_HEADER
        return fields_table(header, self.field_docs.rows(t, positions, with_required=with_required))

    def index_page(self) -> Page:
        blocks: list[Block] = [Heading(1, "Reference"), Heading(2, "Workflows")]
        rows = tuple(
            (
                f"[{code(d.name)}]({d.name}.{self.ext})",
                code(d.version),
                str(len(d.steps)),
                d.description or one_line(d.source_map.get("doc")),
            )
            for d in self.definitions
        )
        blocks.append(Table(("Workflow", "Version", "Steps", "Description"), rows))
        blocks.append(Heading(2, "Task contracts"))
        task_rows = tuple(
            (
                task_link(c.ir.name, self.ext),
                code(c.ir.version),
                task_link(c.ir.compensated_by, self.ext) if c.ir.compensated_by else "",
            )
            for c in self.contracts
        )
        blocks.append(Table(("Task", "Version", "Compensated by"), task_rows))
        return Page("index", "Reference", tuple(blocks))


def contracts_for(definitions: Sequence[Definition], declared: Sequence[Any]) -> list[Contract]:
    """Declared contracts in load order, then built-in tasks the workflows use."""
    found = [Contract(d.contract, d.file, d.line, d.doc, d.description, d.fields) for d in declared]
    names = {c.ir.name for c in found}
    for definition in definitions:
        smap = definition.source_map.get("contracts", {})
        for contract in definition.contracts.values():
            if isinstance(contract, TaskContract) and contract.name not in names:
                names.add(contract.name)
                position = smap.get(contract.name, {})
                found.append(
                    Contract(
                        contract,
                        position.get("file") if position.get("file") != "<prelude>" else None,
                        position.get("line"),
                        position.get("doc"),
                        None,
                        {k: position[k] for k in ("input", "output") if k in position},
                    )
                )
    return found


# --- renderers --------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(page: Page) -> str:
    parts = []
    for block in page.blocks:
        match block:
            case Heading(level, text):
                parts.append("#" * level + " " + text)
            case Para(text):
                parts.append(text)
            case Table(header, rows):
                lines = ["| " + " | ".join(header) + " |" if any(header) else "|  |  |"]
                lines.append("|" + "---|" * len(header))
                lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
                parts.append("\n".join(lines))
            case Code(language, text):
                parts.append(f"```{language}\n{text.rstrip()}\n```")
            case Anchor(id):
                parts.append(f'<a id="{id}"></a>')
            case Diagram(mermaid, _):
                parts.append(f"```mermaid\n{mermaid.rstrip()}\n```")
    return "\n\n".join(parts) + "\n"


_INLINE = re.compile(
    r"``\s?(?P<code2>.+?)\s?``|`(?P<code>[^`]+)`|\[(?P<text>[^\]]*)\]\((?P<url>[^)\s]+)\)"
)


def inline_html(text: str) -> str:
    """Code spans and links as tags, everything else escaped."""
    out = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos : match.start()]))
        if match.group("url") is not None:
            url = match.group("url")
            safe = url if not re.match(r"(?i)\s*(javascript|data|vbscript):", url) else "#"
            out.append(f'<a href="{html.escape(safe)}">{inline_html(match.group("text"))}</a>')
        else:
            body = match.group("code2") if match.group("code2") is not None else match.group("code")
            out.append(f"<code>{html.escape(body)}</code>")
        pos = match.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


_CSS = """
:root { color-scheme: light dark; --fg: #1f2937; --muted: #6b7280; --bg: #ffffff;
  --line: #e5e7eb; --code: #f3f4f6; --accent: #6d28d9; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e5e7eb; --muted: #9ca3af; --bg: #0b1020; --line: #1f2937; --code: #111827;
    --accent: #a78bfa; }
}
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  sans-serif; color: var(--fg); background: var(--bg); max-width: 72rem; margin: 2rem auto;
  padding: 0 1rem; line-height: 1.5; }
a { color: var(--accent); }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 0.9em; background: var(--code); border-radius: 4px; }
code { padding: 0.1em 0.3em; }
pre { padding: 0.8em; overflow-x: auto; }
pre code { padding: 0; background: none; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid var(--line); padding: 0.3em 0.6em; text-align: left;
  vertical-align: top; }
th { color: var(--muted); }
nav { margin-bottom: 1em; color: var(--muted); }
.diagram svg { max-width: 100%; height: auto; }
details summary { cursor: pointer; color: var(--muted); }
"""


def _svg_body(svg: str) -> str:
    """The `<svg>` element alone, for inlining in a page."""
    start = svg.find("<svg")
    return svg[start:].rstrip() if start >= 0 else svg


def to_html(page: Page) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(page.title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
    ]
    if page.name != "index":
        parts.append('<nav><a href="index.html">Reference</a></nav>')
    for block in page.blocks:
        match block:
            case Heading(level, text):
                parts.append(f"<h{level}>{inline_html(text)}</h{level}>")
            case Para(text):
                parts.append(f"<p>{inline_html(text)}</p>")
            case Table(header, rows):
                table = ["<table>"]
                if any(header):
                    table.append(
                        "<thead><tr>"
                        + "".join(f"<th>{inline_html(h)}</th>" for h in header)
                        + "</tr></thead>"
                    )
                table.append("<tbody>")
                for row in rows:
                    table.append(
                        "<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in row) + "</tr>"
                    )
                table.append("</tbody></table>")
                parts.append("\n".join(table))
            case Code(language, text):
                parts.append(
                    f'<pre><code class="language-{language}">{html.escape(text.rstrip())}</code></pre>'
                )
            case Anchor(id):
                parts.append(f'<a id="{html.escape(id)}"></a>')
            case Diagram(mermaid, svg):
                parts.append(f'<div class="diagram">\n{_svg_body(svg)}\n</div>')
                parts.append(
                    "<details><summary>Mermaid source</summary>"
                    f'<pre><code class="language-mermaid">{html.escape(mermaid.rstrip())}</code></pre>'
                    "</details>"
                )
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _count(value: int | None) -> str:
    return "unbounded" if value is None else str(value)


def envelope_section(definition: Definition) -> Iterator[Block]:
    """The static envelope (orbit_core.envelope) of one run: what `orbit
    plan` prints, without the store's figures."""
    from orbit_core.envelope import envelope

    env = envelope(definition)
    cost = env.cost
    yield Heading(2, "Resource envelope")
    run = "run (the count restarts with `continue_as_new`)" if env.per_run else "execution"
    yield Para(
        f"What one {run} records in its history, on the typical path (every step"
        " succeeds at its first attempt) and in the worst case (every attempt fails"
        " and the run aborts through its compensation and handlers)."
    )
    yield Table(
        ("", "Typical", "Worst case"),
        (
            ("History events", str(cost.events), _count(cost.worst_events)),
            ("Commits", str(cost.commits), _count(cost.worst_commits)),
            ("Task dispatches", str(cost.dispatches), _count(cost.worst_dispatches)),
            ("History bytes", str(cost.bytes), _count(cost.worst_bytes)),
        ),
    )
    yield Table(
        ("Step", "Typical events", "Worst-case events"),
        tuple((code(s.key), str(s.cost.events), _count(s.cost.worst_events)) for s in env.steps),
    )
    for signal, extra in env.per_signal:
        yield Para(f"Each {code(signal)} signal no step takes adds {_count(extra)} event(s).")
    for cause in env.unbounded:
        where = f"step {code(cause.step)}: " if cause.step else ""
        yield Para(f"No bound on events: {where}{cause.reason}. Fix: {cause.fix}.")
    if env.unbounded_bytes:
        yield Para(f"No bound on bytes: {env.unbounded_bytes[0].reason}.")
