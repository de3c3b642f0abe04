"""Running the `orbit` CLI against a real `orbit server`, for golden tests.

`Orbit` invokes the CLI in-process (click's runner) against a server URL.
`TaskWorker` serves tasks from a thread over the raw worker protocol, with
plain functions as handlers, so the tests need no SDK. Outputs are compared
with the book's transcripts (golden files of the CLI's fake-runtime tests, or
written in the test) by the end-to-end tests' `same`, whose `mask` is the one
place that knows what differs from one run to the next.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from e2e.e2e_transcripts import book, mask, same
from server_harness import Http, RawWorker, ServerProcess

from orbit_cli.main import cli

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "orbit_cli" / "tests" / "golden"


def golden(name: str) -> str:
    """A transcript of the book kept as a golden file of the CLI tests."""
    return (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")


# `orbit run` reports the states it happens to see when it looks: whether a
# unit is caught queued (·) or waiting for a retry (↻) depends on timing.
_PASSING = re.compile(r"^  [·↻] ")


def same_run(actual: str, expected: str) -> None:
    """`same` for `orbit run`'s report, which may also show passing states."""
    expected_lines = set(book(expected).splitlines())
    lines = actual.splitlines()
    kept = [line for line in lines if not _PASSING.match(line) or mask(line) in expected_lines]
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
