"""In-process handlers: Python functions serving task contracts on the
engine's own threads. They are workers like any other: they register a
session, poll and report through the engine's public methods."""

from __future__ import annotations

import contextlib
import inspect
import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orbit_core.dispatch import Session
from orbit_core.errors import OrbitError

if TYPE_CHECKING:
    from orbit_core.engine.service import Engine


class TaskError(Exception):
    """Raised by an in-process handler to fail its attempt with a code."""

    def __init__(
        self, code: str, message: str = "", retryable: bool = True, details: Any = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details


class Handlers:
    def __init__(
        self,
        engine: Engine,
        sessions: dict[str, Session],
        threads: int,
        spawn: Callable[[Callable[[], None], str], None],
        stop: threading.Event,
    ) -> None:
        self._engine = engine
        self._sessions = sessions
        self.threads = threads
        self._spawn = spawn
        self._stop = stop
        self._started = False
        self._handlers: dict[tuple[str, str], tuple[Callable[..., Any], bool]] = {}
        # One local worker session per runtime.
        self._local: dict[str, Session] = {}

    def register(self, task_name: str, version: str, fn: Callable[..., Any], runtime: str) -> None:
        takes_task = len(inspect.signature(fn).parameters) >= 2
        self._handlers[(task_name, version)] = (fn, takes_task)
        runtime = runtime.lower()
        session = self._local.get(runtime)
        contracts = sorted(k for k in self._handlers)
        if session is None:
            reply = self._engine.register_worker(f"in-process-{runtime}", runtime, contracts)
            session = self._sessions[reply["worker_session_id"]]
            session.local = True
            self._local[runtime] = session
            if self.threads > 0 and not self._started:
                self._started = True
                for i in range(self.threads):
                    self._spawn(self._loop, f"orbit-handler-{i}")
        else:
            session.contracts = tuple(contracts)

    def run_all(self) -> int:
        """Runs queued tasks on the calling thread until none is left."""
        ran = 0
        progress = True
        while progress:
            progress = False
            for session in list(self._local.values()):
                task = self._engine.poll(session.session_id, 0)
                if task is not None:
                    self._run(task)
                    ran += 1
                    progress = True
        return ran

    def _loop(self) -> None:
        while not self._stop.is_set():
            sessions = list(self._local.values())
            wait = 1000 if len(sessions) == 1 else 100
            for session in sessions:
                try:
                    task = self._engine.poll(session.session_id, wait)
                except OrbitError:
                    continue
                if task is not None:
                    self._run(task)

    def _run(self, task: dict[str, Any]) -> None:
        handler = self._handlers.get((task["task_name"], task["contract_version"]))
        if handler is None:
            return
        fn, takes_task = handler
        token = task["token"]
        try:
            output = fn(task["input"], task) if takes_task else fn(task["input"])
        except TaskError as exc:
            failure = (exc.code, exc.message, exc.retryable, exc.details)
        except Exception as exc:
            failure = (
                "UNHANDLED_EXCEPTION",
                f"{type(exc).__name__}: {exc}",
                True,
                {"traceback": traceback.format_exc()},
            )
        else:
            with contextlib.suppress(OrbitError):
                self._engine.complete(token, output)
            return
        with contextlib.suppress(OrbitError):
            self._engine.fail(token, *failure)
