"""`orbit lsp` driven by a real LSP client (pygls's) over stdio.

Each feature of chapter 54 on the book's examples: diagnostics (with an
unsaved buffer that differs from the disk, across an import), hover,
definition across imports, completion, outline, formatting; and the server
survives a malformed request, an unknown method and a document that does
not parse.
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
import weakref
from collections.abc import Sequence
from pathlib import Path

import pytest
from lsp_client import Session, run, uri
from lsprotocol import types as lsp

from orbit_cli.lsp import server
from orbit_cli.lsp.server import to_lsp
from orbit_lang.compiler import compile_source

ROOT = Path(__file__).resolve().parents[2]
ORDER = ROOT / "tests" / "book" / "cases" / "order_receipt"
HELLO = ROOT / "examples" / "hello.orbit"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def order(tmp_path: Path) -> Path:
    """The book's order workflow and its contracts, in a directory of our own."""
    for name in ("order_processing.orbit", "contracts.orbit"):
        shutil.copy(ORDER / name, tmp_path / name)
    return tmp_path


def at(text: str, needle: str, delta: int = 0) -> tuple[int, int]:
    """The 0-based line and column of `needle` (plus `delta` characters)."""
    offset = text.index(needle) + delta
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def _hover_text(hover: lsp.Hover | None) -> str:
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    return hover.contents.value


def test_initialize_names_the_server_and_full_sync() -> None:
    async def check(s: Session) -> None:
        assert s.result is not None
        assert s.result.server_info is not None
        assert s.result.server_info.name == "orbit-lsp"
        caps = s.result.capabilities
        sync = caps.text_document_sync
        kind = sync.change if isinstance(sync, lsp.TextDocumentSyncOptions) else sync
        assert kind == lsp.TextDocumentSyncKind.Full
        assert caps.completion_provider is not None
        assert set(caps.completion_provider.trigger_characters or []) == {".", '"'}
        assert caps.hover_provider and caps.definition_provider
        assert caps.document_symbol_provider and caps.document_formatting_provider

    run(check)


def test_diagnostics_carry_code_and_source(tmp_path: Path) -> None:
    broken = tmp_path / "hello.orbit"
    broken.write_text(HELLO.read_text().replace("compose.message", "compose.mesage"))

    async def check(s: Session) -> None:
        target = s.open(broken)
        found = await s.wait_diagnostics(target, bool)
        assert [(d.code, d.source) for d in found] == [("E0302", "orbit")] or all(
            d.source == "orbit" and str(d.code).startswith("E") for d in found
        )
        line, _ = at(broken.read_text(), "compose.mesage")
        assert found[0].range.start.line == line
        # Fixing the buffer clears them, without saving.
        s.change(target, HELLO.read_text())
        assert await s.wait_diagnostics(target, lambda d: not d) == []

    run(check)


def test_unsaved_import_takes_precedence_over_the_disk(order: Path) -> None:
    workflow = order / "order_processing.orbit"
    contracts = order / "contracts.orbit"

    async def check(s: Session) -> None:
        main = s.open(workflow)
        before = await s.wait_diagnostics(main)
        assert all(d.code != "E0302" for d in before)
        # The contract loses `score` in the editor only: the workflow that
        # reads `analyze_risk.score` is now wrong although the disk is not.
        edited = contracts.read_text().replace(
            "output { score: Float, reasons: List<String> }",
            "output { rating: Float, reasons: List<String> }",
        )
        assert edited != contracts.read_text()
        other = s.open(contracts, edited)
        await s.wait_diagnostics(other)
        found = await s.wait_diagnostics(main, lambda d: len(d) > len(before))
        assert any("score" in d.message for d in found), found
        assert all(d.source == "orbit" for d in found)

    run(check)


def test_hover(order: Path) -> None:
    text = (order / "order_processing.orbit").read_text()

    async def hover(s: Session, target: str, needle: str, delta: int = 0) -> str:
        line, column = at(text, needle, delta)
        params = lsp.HoverParams(**s.position(target, line, column))
        return _hover_text(await s.client.text_document_hover_async(params))

    async def check(s: Session) -> None:
        target = s.open(order / "order_processing.orbit")
        await s.wait_diagnostics(target)
        contract = await hover(s, target, '"risk.analyze"', 3)
        assert 'task "risk.analyze"' in contract and "score: Float" in contract
        step = await hover(s, target, "when analyze_risk.score", 7)
        assert "step analyze_risk" in step and "score: Float" in step
        field = await hover(s, target, "analyze_risk.score < 0.8", 14)
        assert "analyze_risk.score: Float" in field
        inputs = await hover(s, target, "input.order_id", 7)
        assert "input.order_id: String" in inputs
        keyword = await hover(s, target, "idempotency_key")
        assert keyword.startswith("**idempotency_key**")
        schema = await hover(s, target, "List<LineItem>", 6)
        assert "schema LineItem" in schema and "sku: String" in schema

    run(check)


def test_hover_on_child_workflow_and_builtin(tmp_path: Path) -> None:
    source = tmp_path / "family.orbit"
    text = (
        (HELLO.read_text())
        + """
workflow Parent {
    version "1.0.0"
    input { name: String }
    output { text: String }

    step child {
        workflow "Hello"
        with { name: upper(input.name) }
    }

    return { text: child.greeting }
}
"""
    )
    source.write_text(text)

    async def check(s: Session) -> None:
        target = s.open(source)
        assert await s.wait_diagnostics(target) == []
        line, column = at(text, '"Hello"', 2)
        hovered = await s.client.text_document_hover_async(
            lsp.HoverParams(**s.position(target, line, column))
        )
        child = _hover_text(hovered)
        assert "workflow Hello" in child and "greeting: String" in child
        line, column = at(text, "upper(", 1)
        hovered = await s.client.text_document_hover_async(
            lsp.HoverParams(**s.position(target, line, column))
        )
        assert "upper(s: String) -> String" in _hover_text(hovered)
        line, column = at(text, "child.greeting", 8)
        hovered = await s.client.text_document_hover_async(
            lsp.HoverParams(**s.position(target, line, column))
        )
        assert "child.greeting: String" in _hover_text(hovered)

    run(check)


def test_definition_across_imports(order: Path) -> None:
    text = (order / "order_processing.orbit").read_text()
    contracts = (order / "contracts.orbit").read_text()

    async def check(s: Session) -> None:
        target = s.open(order / "order_processing.orbit")
        await s.wait_diagnostics(target)
        line, column = at(text, '"risk.analyze"', 2)
        found = await s.client.text_document_definition_async(
            lsp.DefinitionParams(**s.position(target, line, column))
        )
        assert isinstance(found, lsp.Location)
        assert found.uri == uri(order / "contracts.orbit")
        assert found.range.start.line == at(contracts, 'task "risk.analyze"')[0]
        # A schema defined in the import.
        line, column = at(text, "List<LineItem>", 6)
        found = await s.client.text_document_definition_async(
            lsp.DefinitionParams(**s.position(target, line, column))
        )
        assert isinstance(found, lsp.Location)
        assert found.range.start.line == at(contracts, "schema LineItem")[0]
        # A step in the same file.
        line, column = at(text, "after validate_order", 7)
        found = await s.client.text_document_definition_async(
            lsp.DefinitionParams(**s.position(target, line, column))
        )
        assert isinstance(found, lsp.Location)
        assert found.uri == target
        assert found.range.start.line == at(text, "step validate_order")[0]

    run(check)


def _labels(result: lsp.CompletionList | Sequence[lsp.CompletionItem] | None) -> set[str]:
    assert result is not None
    items = result.items if isinstance(result, lsp.CompletionList) else result
    return {item.label for item in items}


def test_completion(order: Path) -> None:
    path = order / "order_processing.orbit"
    text = path.read_text()

    async def complete(s: Session, target: str, edited: str, needle: str, delta: int) -> set[str]:
        line, column = at(edited, needle, delta)
        params = lsp.CompletionParams(**s.position(target, line, column))
        return _labels(await s.client.text_document_completion_async(params))

    async def check(s: Session) -> None:
        target = s.open(path)
        await s.wait_diagnostics(target)
        # Fields after `input.` and after a step's name.
        edited = text.replace("when analyze_risk.score < 0.8", "when analyze_risk.")
        s.change(target, edited)
        fields = await complete(s, target, edited, "when analyze_risk.", 18)
        assert fields == {"score", "reasons"}
        fields = await complete(s, target, edited, "with { order_id: input.", 23)
        assert {"order_id", "customer_id", "amount", "currency", "items"} <= fields
        # Task names inside `worker "`.
        edited = text.replace('worker "risk.analyze"', 'worker "')
        s.change(target, edited)
        tasks = await complete(s, target, edited, 'worker "', 8)
        assert {"risk.analyze", "orders.validate", "receipts.send"} <= tasks
        # Keywords, types and built-ins elsewhere.
        general = await complete(s, target, edited, "    timeout 5m", 4)
        assert {"step", "retry", "String", "List", "coalesce", "LineItem"} <= general

    run(check)


def test_document_symbols(order: Path) -> None:
    async def check(s: Session) -> None:
        target = s.open(order / "contracts.orbit")
        await s.wait_diagnostics(target)
        found = await s.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=target))
        )
        assert found is not None
        names = [symbol.name for symbol in found]
        assert "LineItem" in names and "risk.analyze" in names
        main = s.open(order / "order_processing.orbit")
        await s.wait_diagnostics(main)
        found = await s.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=main))
        )
        assert found is not None
        workflow = next(x for x in found if x.name == "OrderProcessing")
        assert isinstance(workflow, lsp.DocumentSymbol)
        steps = [child.name for child in workflow.children or []]
        assert steps[:3] == ["validate_order", "analyze_risk", "reserve_inventory"]

    run(check)


def test_formatting_matches_orbit_fmt(tmp_path: Path) -> None:
    messy = ROOT / "tests" / "book" / "cases" / "messy" / "messy.orbit"
    from orbit_lang.formatter import format_source

    text = messy.read_text()
    expected = format_source(text, str(messy)).text
    assert expected != text

    async def check(s: Session) -> None:
        target = s.open(tmp_path / "messy.orbit", text)
        edits = await s.client.text_document_formatting_async(
            lsp.DocumentFormattingParams(
                text_document=lsp.TextDocumentIdentifier(uri=target),
                options=lsp.FormattingOptions(tab_size=4, insert_spaces=True),
            )
        )
        assert edits is not None and len(edits) == 1
        assert edits[0].new_text == expected
        assert edits[0].range.start == lsp.Position(line=0, character=0)
        # An already formatted document needs no edit.
        s.change(target, expected)
        again = await s.client.text_document_formatting_async(
            lsp.DocumentFormattingParams(
                text_document=lsp.TextDocumentIdentifier(uri=target),
                options=lsp.FormattingOptions(tab_size=4, insert_spaces=True),
            )
        )
        assert not again

    run(check)


def test_a_document_that_does_not_parse(tmp_path: Path) -> None:
    async def check(s: Session) -> None:
        target = s.open(tmp_path / "junk.orbit", 'workflow { step ( "\n}} task ::: \x00 é😀')
        found = await s.wait_diagnostics(target, bool)
        assert all(d.source == "orbit" for d in found)
        for line in range(3):
            for column in range(0, 30, 3):
                position = s.position(target, line, column)
                await s.client.text_document_hover_async(lsp.HoverParams(**position))
                await s.client.text_document_completion_async(lsp.CompletionParams(**position))
                await s.client.text_document_definition_async(lsp.DefinitionParams(**position))
        # Positions far past the end answer nothing.
        far = s.position(target, 10_000, 10_000)
        assert await s.client.text_document_hover_async(lsp.HoverParams(**far)) is None
        await s.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=target))
        )
        # The server still works.
        hello = s.open(HELLO)
        assert await s.wait_diagnostics(hello) == []

    run(check)


def test_unknown_method_and_malformed_request() -> None:
    async def check(s: Session) -> None:
        with pytest.raises(Exception) as unknown:
            await s.client.protocol.send_request_async("orbit/noSuchMethod", {"x": 1})
        assert "orbit/noSuchMethod" in str(unknown.value) or "not found" in str(unknown.value)
        # A document never opened.
        nowhere = s.position("file:///nowhere/at/all.orbit", 0, 0)
        assert await s.client.text_document_hover_async(lsp.HoverParams(**nowhere)) is None
        # Still answering.
        hello = s.open(HELLO)
        assert await s.wait_diagnostics(hello) == []
        text = HELLO.read_text()
        line, column = at(text, '"greeting.compose"', 2)
        hovered = await s.client.text_document_hover_async(
            lsp.HoverParams(**s.position(hello, line, column))
        )
        assert 'task "greeting.compose"' in _hover_text(hovered)

    run(check)


def test_garbage_on_stdin_does_not_kill_the_server() -> None:
    import subprocess

    from lsp_client import ORBIT

    command = [str(ORBIT), "lsp"] if ORBIT.exists() else [sys.executable, "-m", "orbit_cli", "lsp"]

    def frame(body: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    def message(**fields: object) -> bytes:
        return frame(json.dumps({"jsonrpc": "2.0", **fields}).encode())

    data = frame(b"{{{{{") + frame(b'["x", 1]') + frame(b"null")
    data += message(id=7, method="textDocument/hover", params={"textDocument": 5})
    data += message(id=1, method="shutdown") + message(method="exit")
    done = subprocess.run(command, input=data, capture_output=True, timeout=60, check=False)
    answers = [
        json.loads(part.split(b"\r\n\r\n", 1)[1])
        for part in done.stdout.split(b"Content-Length: ")[1:]
    ]
    by_id = {answer.get("id"): answer for answer in answers if "id" in answer}
    assert "error" in by_id[7]  # the malformed hover is refused, not fatal
    assert by_id[1].get("result", "missing") is None  # and shutdown still answered


def test_diagnostics_after_edits_are_those_of_a_whole_check(order: Path) -> None:
    """The server remembers parses and checks between edits; what it publishes
    for each version is what `orbit check` of that text reports."""
    workflow = order / "order_processing.orbit"
    text = workflow.read_text()
    # Characters typed at places spread over the file, some of which break the
    # syntax, each on top of the one before, then the text restored.
    texts = []
    edited = text
    for index, typed in enumerate('x.{1"}x'):
        where = len(edited) * (index + 1) // 9
        edited = edited[:where] + typed + edited[where:]
        texts.append(edited)
    texts.append(text)

    async def check(s: Session) -> None:
        target = s.open(workflow)
        await s.wait_version(target, 1)
        published = []
        for version, edited in enumerate(texts, start=2):
            s.change(target, edited)
            await s.wait_version(target, version)
            whole = compile_source(edited, str(workflow))
            expected = [
                to_lsp(d, edited)
                for d in whole.diagnostics
                if d.span is None or d.span.file == str(workflow)
            ]
            assert s.diagnostics[target] == expected, version
            published.append(len(expected))
        assert max(published) > published[-1]

    run(check)


def test_what_an_analysis_leaves_in_cycles_is_freed_before_freezing() -> None:
    """The server hides what it keeps from the cycle collector after each
    analysis; garbage in cycles at that moment must be freed, not kept."""

    class Node:
        other: object = None

    first, second = Node(), Node()
    first.other, second.other = second, first
    left = weakref.ref(first)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del first, second
        server._tidy()
        assert left() is None
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
