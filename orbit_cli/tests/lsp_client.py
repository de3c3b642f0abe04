"""A real LSP client (pygls's) driving `orbit lsp` over stdio, for the tests
and the benchmark: it starts the server process, records every published
diagnostic, and lets a test wait for the ones it expects."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

ORBIT = Path(sys.executable).with_name("orbit")


def uri(path: Path) -> str:
    found = from_fs_path(str(path))
    assert isinstance(found, str)
    return found


class Session:
    def __init__(self, options: Any = None) -> None:
        # The client's initializationOptions.
        self.options = options
        self.client = LanguageClient("orbit-lsp-tests", "1")
        self.diagnostics: dict[str, list[lsp.Diagnostic]] = {}
        self.arrivals: dict[str, float] = {}
        self.publications = 0
        # The document version the last diagnostics of each uri were for.
        self.published_versions: dict[str, int | None] = {}
        self._changed = asyncio.Condition()
        self.versions: dict[str, int] = {}
        self.result: lsp.InitializeResult | None = None

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)  # type: ignore[untyped-decorator]  # pygls's decorator is unannotated
        async def published(params: lsp.PublishDiagnosticsParams) -> None:
            async with self._changed:
                self.diagnostics[params.uri] = list(params.diagnostics)
                self.arrivals[params.uri] = time.perf_counter()
                self.published_versions[params.uri] = params.version
                self.publications += 1
                self._changed.notify_all()

    async def start(self) -> None:
        if ORBIT.exists():
            await self.client.start_io(str(ORBIT), "lsp")
        else:
            code = "from orbit_cli.main import cli; cli()"
            await self.client.start_io(sys.executable, "-c", code, "lsp")
        self.result = await self.client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(),
                process_id=None,
                initialization_options=self.options,
            )
        )
        self.client.initialized(lsp.InitializedParams())

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()  # type: ignore[no-untyped-call]  # unannotated in pygls

    def open(self, path: Path, text: str | None = None) -> str:
        target = uri(path)
        self.versions[target] = 1
        self.diagnostics.pop(target, None)
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(
                    uri=target,
                    language_id="orbit",
                    version=1,
                    text=path.read_text() if text is None else text,
                )
            )
        )
        return target

    def change(self, target: str, text: str) -> None:
        self.versions[target] += 1
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=target, version=self.versions[target]),
                [lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def save(self, target: str) -> None:
        self.client.text_document_did_save(
            lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri=target))
        )

    def configure(self, settings: Any) -> None:
        self.client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(settings=settings)
        )

    async def wait_diagnostics(
        self,
        target: str,
        accept: Callable[[list[lsp.Diagnostic]], bool] = lambda _: True,
        timeout: float = 30.0,
    ) -> list[lsp.Diagnostic]:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(
                    lambda: target in self.diagnostics and accept(self.diagnostics[target])
                ),
                timeout,
            )
            return self.diagnostics[target]

    async def wait_publication(self, after: int, timeout: float = 30.0) -> None:
        """Waits until more than `after` diagnostics notifications arrived."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.publications > after), timeout
            )

    async def wait_version(self, target: str, version: int, timeout: float = 30.0) -> None:
        """Waits for the diagnostics of `target` at document version `version`."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.published_versions.get(target) == version),
                timeout,
            )

    def position(self, target: str, line: int, character: int) -> dict[str, Any]:
        return {
            "text_document": lsp.TextDocumentIdentifier(uri=target),
            "position": lsp.Position(line=line, character=character),
        }


def run(test: Callable[[Session], Any], timeout: float = 60.0, options: Any = None) -> None:
    """Runs `test(session)` (a coroutine function) against a fresh server
    started with `options` as its initializationOptions."""

    async def main() -> None:
        session = Session(options)
        await session.start()
        try:
            await asyncio.wait_for(test(session), timeout)
        finally:
            await session.stop()

    asyncio.run(main())
