"""Running the `orbit` CLI against a real `orbit server`, for golden tests.

`Orbit` invokes the CLI in-process (click's runner) against a server URL.
`TaskWorker` serves tasks from a thread over the raw worker protocol, with
plain functions as handlers, so the tests need no SDK. `same` compares an
output with the book's transcript (a golden file from the CLI's fake-runtime
tests, or one written in the test) once both are masked by `mask`, the one
place that knows what differs from one run to the next.
"""

from __future__ import annotations

import difflib
import re
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from server_harness import Http, RawWorker, ServerProcess

from orbit_cli.main import cli

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "orbit_cli" / "tests" / "golden"

# What legitimately differs between the book's run and ours, and its stand-in.
_MASKS = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<id>"),
    (re.compile(r"sha256:[0-9a-f]{12,64}"), "sha256:<hash>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<token>"),
    (re.compile(r"\bpost-[0-9a-f]{8}\b"), "post-<id>"),
    (re.compile(r"\b1[78]\d{11}\b"), "<ms>"),
]
_DURATION = r"\d+(?:\.\d+)?(?:ms|s)|\d+m\d\ds|\d+h\d\dm"
# A duration inside a line sits in a right-aligned column: masked, it keeps the
# column's width, so a misaligned table still differs. One that ends a line may
# end a padded column whose trailing blanks the book lost, so the blanks before
# it are not compared.
_COLUMN = re.compile(rf"(?<=\S)( +(?:{_DURATION}))(?= )")
_TRAILING = re.compile(rf" +(?:{_DURATION})$")


def mask(text: str) -> str:
    for pattern, stand_in in _MASKS:
        text = pattern.sub(stand_in, text)
    lines = [_COLUMN.sub(_same_width, line.rstrip()) for line in text.splitlines()]
    return "\n".join(_TRAILING.sub(" <t>", line) for line in lines).strip("\n")


def _same_width(match: re.Match[str]) -> str:
    return "<t>".rjust(len(match[1]))


def golden(name: str) -> str:
    """A transcript of the book kept as a golden file of the CLI tests."""
    return (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")


def same(actual: str, expected: str) -> None:
    """Asserts that `actual` reads as the book's `expected` once both are masked."""
    want = mask(textwrap.dedent(expected)).splitlines()
    got = mask(actual).splitlines()
    diff = difflib.unified_diff(want, got, "book", "actual", lineterm="")
    assert got == want, "\n" + "\n".join(diff)


# `orbit run` reports the states it happens to see when it looks: whether a
# unit is caught queued (·) or waiting for a retry (↻) depends on timing.
_PASSING = re.compile(r"^  [·↻] ")


def same_run(actual: str, expected: str) -> None:
    """`same` for `orbit run`'s report, which may also show passing states."""
    book = set(mask(textwrap.dedent(expected)).splitlines())
    lines = actual.splitlines()
    kept = [line for line in lines if not _PASSING.match(line) or mask(line) in book]
    same("\n".join(kept), expected)


class Orbit:
    """Runs `orbit ...` in-process against `server`, as the admin `token` by default."""

    def __init__(self, server: str, token: str = "") -> None:
        self.server = server
        self.token = token

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        environment = {"ORBIT_SERVER": self.server, "ORBIT_TOKEN": self.token, "NO_COLOR": "1"}
        environment.update(env or {})
        return CliRunner(env=environment).invoke(cli, list(args), catch_exceptions=False)

    def ok(self, *args: str) -> Result:
        result = self(*args)
        assert result.exit_code == 0, result.output
        return result


def one_error_line(result: Result) -> str:
    """The single `error: ...` line of a failed command (nothing on stdout)."""
    assert result.exit_code != 0, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


class TaskFailure(Exception):
    """Raised by a handler: the attempt fails with this code and message."""

    def __init__(self, code: str, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


Handler = Callable[[dict[str, Any]], Any]


class TaskWorker:
    """A worker on its own connection and thread; each handler gets the task
    document (input, attempt, idempotency_key, ...) and returns the output."""

    def __init__(
        self,
        server: ServerProcess,
        worker_id: str,
        runtime: str,
        handlers: dict[str, Handler],
        token: str | None = None,
    ) -> None:
        self.handlers = handlers
        contracts = [(name, "1.0.0") for name in handlers]
        self.raw = RawWorker(Http(server.addr, token), worker_id, contracts, runtime)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=worker_id, daemon=True)
        self._crash: BaseException | None = None

    def start(self) -> TaskWorker:
        reply = self.raw.register()
        assert reply.status == 200, reply
        self._thread.start()
        return self

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                reply = self.raw.poll(wait_ms=200)
                if reply.status == 200:
                    self._handle(reply.body)
                else:
                    assert reply.status == 204, reply
        except BaseException as exc:  # reported by stop(), in the test's thread
            self._crash = exc

    def _handle(self, task: dict[str, Any]) -> None:
        try:
            output = self.handlers[task["task_name"]](task)
        except TaskFailure as failure:
            self.raw.fail(
                task["token"], failure.code, error_message=str(failure), retryable=failure.retryable
            )
        else:
            self.raw.complete(task["token"], output)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        if self._crash is None:
            self.raw.unregister()
        self.raw.http.close()
        if self._crash is not None:
            raise AssertionError(f"worker {self.raw.worker_id} crashed") from self._crash
