"""The pygls server of `orbit lsp`: documents in, diagnostics and answers out.

Analyses run one at a time on a worker thread, newest edit first (an edit
queued behind a newer one is skipped, not delayed). What an analysis keeps
for the next one (the parsed declarations and checked workflows of
`workspace`) is a large, long-lived heap of small acyclic objects; the
cycle collector's full passes over it took hundreds of milliseconds every
few keystrokes. Once an analysis is published, the worker thread collects
what the analysis left (a full collection that only looks at what was made
since the last one, a few milliseconds) and `gc.freeze()` moves what is
still alive out of the collector's sight (reference counting still frees
it). Collecting first matters: garbage in a cycle that is frozen is never
freed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import sys
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, LanguageServerProtocol
from pygls.uris import from_fs_path, to_fs_path

from orbit_cli import __version__
from orbit_cli.lsp import features, verifying
from orbit_cli.lsp.workspace import Analysis, Checkers, ParseCache, analyse, identity
from orbit_lang.diagnostics import Diagnostic
from orbit_lang.formatter import FormatError, format_source
from orbit_lang.process import tune_for_compiling

SERVER_NAME = "orbit-lsp"


class _Protocol(LanguageServerProtocol):
    """Answers a request whose params do not decode with an Invalid Params
    error (pygls only reports it to the user, leaving the client waiting)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except Exception as error:
            if not (isinstance(data, dict) and "id" in data and "method" in data):
                raise
            refused = error if isinstance(error, JsonRpcInvalidParams) else JsonRpcInvalidParams()
            self._send_response(data["id"], error=refused.to_response_error())
            # Nothing left to do for the message itself.
            return JsonRPCNotification(method="$/orbit/refused", jsonrpc="2.0", params=None)


def _path(uri: str) -> str:
    path = to_fs_path(uri)
    return path if path is not None else uri


def _uri(path: str) -> str:
    uri = from_fs_path(path)
    return uri if uri is not None else path


def to_lsp(diagnostic: Diagnostic, text: str | None) -> lsp.Diagnostic:
    severity = (
        lsp.DiagnosticSeverity.Error if diagnostic.is_error else lsp.DiagnosticSeverity.Warning
    )
    message = diagnostic.message
    extra = [*diagnostic.notes, *([f"help: {diagnostic.help}"] if diagnostic.help else [])]
    if diagnostic.label:
        extra.insert(0, diagnostic.label)
    if extra:
        message += "\n" + "\n".join(extra)
    related = [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(uri=_uri(label.span.file), range=features.span_range(label.span)),
            message=label.message or diagnostic.message,
        )
        for label in diagnostic.labels
    ]
    return lsp.Diagnostic(
        range=features.span_range(diagnostic.span, text),
        message=message,
        severity=severity,
        code=diagnostic.code,
        source="orbit",
        related_information=related or None,
    )


class State:
    """Open documents, the analyses in flight and the latest finished ones."""

    def __init__(self, server: LanguageServer) -> None:
        self.server = server
        self.cache = ParseCache()
        self.checkers = Checkers()
        # One worker: analyses are CPU-bound and the newest one is all that counts.
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="orbit-lsp")
        self.versions: dict[str, int] = {}
        self.pending: dict[str, asyncio.Future[Analysis | None]] = {}
        self.latest: dict[str, Analysis] = {}
        self.published: dict[str, set[str]] = {}
        self._counter = 0
        # Verify on save (`verifying`): a thread of its own, so that a search
        # never delays the analysis of the next edit; its findings per
        # document, kept until the document changes or is saved again.
        self.settings = verifying.Settings()
        self.verifier = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="orbit-lsp-verify"
        )
        self.verified: dict[str, list[lsp.Diagnostic]] = {}
        self._saves: dict[str, int] = {}

    def text(self, uri: str) -> str:
        return self.server.workspace.get_text_document(uri).source

    def buffers(self) -> dict[str, str]:
        return {
            identity(_path(uri)): doc.source
            for uri, doc in self.server.workspace.text_documents.items()
        }

    def schedule(self, uri: str) -> None:
        """Analyses `uri` again, and every open document that imports it."""
        changed = identity(_path(uri))
        self._submit(uri)
        for other, analysis in list(self.latest.items()):
            open_elsewhere = other != uri and other in self.server.workspace.text_documents
            if open_elsewhere and changed in {identity(f) for f in analysis.files}:
                self._submit(other)

    def _submit(self, uri: str) -> None:
        self._counter += 1
        version = self._counter
        self.versions[uri] = version
        path, buffers = _path(uri), self.buffers()
        document = self.server.workspace.text_documents.get(uri)
        # The document's own version, sent with its diagnostics so that a
        # client knows which text they are about.
        shown = document.version if document is not None else None
        loop = asyncio.get_running_loop()

        def job() -> Analysis | None:
            if self.versions.get(uri) != version:
                return None  # a newer edit is queued: skip this one
            return analyse(path, buffers, self.cache, version, self.checkers)

        future = loop.run_in_executor(self.executor, job)
        self.pending[uri] = future
        future.add_done_callback(lambda f: self._finished(uri, version, shown, f))

    def _finished(
        self,
        uri: str,
        version: int,
        shown: int | None,
        future: asyncio.Future[Analysis | None],
    ) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        analysis = future.result()
        if analysis is None or self.versions.get(uri) != version:
            return
        self.latest[uri] = analysis
        self.publish(uri, analysis, shown)
        self.executor.submit(_tidy)

    def publish(self, uri: str, analysis: Analysis, shown: int | None = None) -> None:
        by_file: dict[str, list[lsp.Diagnostic]] = {analysis.path: []}
        for path in analysis.files:
            by_file.setdefault(path, [])
        for diagnostic in analysis.diagnostics:
            file = diagnostic.span.file if diagnostic.span is not None else analysis.path
            if file not in by_file:
                continue  # the prelude
            source = analysis.program.sources.get(file)
            by_file[file].append(to_lsp(diagnostic, source.text if source else None))
        uris = {_uri(path): items for path, items in by_file.items()}
        for stale in self.published.get(uri, set()) - set(uris):
            uris[stale] = []
        self.published[uri] = set(uris)
        for target, items in uris.items():
            self.server.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(
                    uri=target,
                    diagnostics=items + self.verified.get(target, []),
                    version=shown if target == uri else None,
                )
            )

    def saved(self, uri: str) -> None:
        """Explores the verify blocks of a saved document, when asked to."""
        self._saves[uri] = save = self._saves.get(uri, 0) + 1
        document = self.server.workspace.text_documents.get(uri)
        if not self.settings.on_save or document is None:
            return
        text = document.source
        if not verifying.wants(text):
            return
        settings, path, root = self.settings, _path(uri), self.server.workspace.root_path
        loop = asyncio.get_running_loop()

        def job() -> list[lsp.Diagnostic] | None:
            if self._saves.get(uri) != save:
                return None  # saved again since: that search counts
            return verifying.verify_file(path, text, settings, root)

        future = loop.run_in_executor(self.verifier, job)
        future.add_done_callback(lambda f: self._verified(uri, save, f))

    def _verified(
        self, uri: str, save: int, future: asyncio.Future[list[lsp.Diagnostic] | None]
    ) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        found = future.result()
        if found is None or self._saves.get(uri) != save:
            return
        self.verified[uri] = found
        analysis = self.latest.get(uri)
        document = self.server.workspace.text_documents.get(uri)
        if analysis is not None and document is not None:
            # Unchanged since the save (`changed` would have dropped this).
            self.publish(uri, analysis, document.version)

    def changed(self, uri: str) -> None:
        """Forgets what was found at the last save: its lines may have moved."""
        self._saves[uri] = self._saves.get(uri, 0) + 1
        self.verified.pop(uri, None)

    async def current(self, uri: str) -> Analysis | None:
        """The analysis of the document as it is now (waits for it)."""
        if uri not in self.pending and uri in self.server.workspace.text_documents:
            self._submit(uri)
        future = self.pending.get(uri)
        while future is not None:
            await asyncio.wait([future])
            latest = self.pending.get(uri)
            if latest is future:
                break
            future = latest
        return self.latest.get(uri)


def _tidy() -> None:
    """Frees what the last analysis left and hides the rest from the collector
    (see the module docstring)."""
    gc.collect()
    gc.freeze()


def build() -> LanguageServer:
    """The `orbit lsp` server, not yet started."""
    server = LanguageServer(
        SERVER_NAME,
        __version__,
        text_document_sync_kind=lsp.TextDocumentSyncKind.Full,
        protocol_cls=_Protocol,
    )
    state = State(server)
    server.orbit_state = state  # type: ignore[attr-defined]
    _settings(server, state)
    _documents(server, state)
    _answers(server, state)
    return server


def _settings(server: LanguageServer, state: State) -> None:
    """The client's `orbit.*` settings: in initializationOptions, then in
    every workspace/didChangeConfiguration (pushed settings)."""

    @server.feature(lsp.INITIALIZE)
    def initialize(params: lsp.InitializeParams) -> None:
        state.settings = verifying.read_settings(params.initialization_options, state.settings)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def configuration(params: lsp.DidChangeConfigurationParams) -> None:
        state.settings = verifying.read_settings(params.settings, state.settings)


def _documents(server: LanguageServer, state: State) -> None:
    """Open, change, save and close: each schedules an analysis."""

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        state.schedule(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        state.changed(params.text_document.uri)
        state.schedule(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: lsp.DidSaveTextDocumentParams) -> None:
        state.schedule(params.text_document.uri)
        state.saved(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        state.changed(uri)
        state.latest.pop(uri, None)
        state.versions.pop(uri, None)
        for target in state.published.pop(uri, set()):
            server.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=target, diagnostics=[])
            )


def _answers(server: LanguageServer, state: State) -> None:
    """The requests answered from analyses and the text."""

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(params: lsp.HoverParams) -> lsp.Hover | None:
        uri = params.text_document.uri
        analysis = await state.current(uri)
        if analysis is None:
            return None
        return features.hover(analysis, state.text(uri), params.position)

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    async def definition(params: lsp.DefinitionParams) -> lsp.Location | None:
        uri = params.text_document.uri
        analysis = await state.current(uri)
        if analysis is None:
            return None
        found = features.definition(analysis, state.text(uri), params.position)
        if found is None:
            return None
        span, file = found
        source = analysis.program.sources.get(file)
        return lsp.Location(
            uri=_uri(file), range=features.span_range(span, source.text if source else None)
        )

    @server.feature(
        lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=[".", '"'])
    )
    async def completion(params: lsp.CompletionParams) -> lsp.CompletionList:
        uri = params.text_document.uri
        # The latest finished analysis, without waiting for the edit that
        # typed the trigger character: names and types rarely change with it.
        analysis = state.latest.get(uri)
        if analysis is None:
            analysis = await state.current(uri)
        items = features.completion(analysis, state.text(uri), params.position)
        return lsp.CompletionList(is_incomplete=False, items=items)

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def symbols(params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        analysis = await state.current(params.text_document.uri)
        return features.symbols(analysis) if analysis is not None else []

    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    def formatting(params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit]:
        uri = params.text_document.uri
        text = state.text(uri)
        try:
            formatted = format_source(text, _path(uri))
        except FormatError:
            return []  # the formatter refuses what it cannot keep intact
        if not formatted.changed:
            return []
        end = features.position_of(text, len(text))
        whole = lsp.Range(lsp.Position(line=0, character=0), end)
        return [lsp.TextEdit(range=whole, new_text=formatted.text)]


def serve() -> None:
    """Runs the server on stdin and stdout until the client exits."""
    # The analysis thread is CPU-bound; a shorter switch interval lets the
    # thread that answers requests take the GIL back sooner while it runs.
    sys.setswitchinterval(0.001)
    # Once, before the analysis thread parses anything (orbit_lang.process).
    tune_for_compiling()
    build().start_io()
