"""In-process handlers: Python functions serving task contracts on the
engine's own threads, as a local worker session.

Handler threads claim tasks in batches and report a batch's results in the
same command that claims the next batch, so a busy engine serves many
attempts per group commit instead of waking a thread per attempt. A batch is
sized so that running it takes about `BATCH_BUDGET_S`: fast handlers get large
batches, slow ones one task at a time, and the results of a batch that turns
out slow are reported as they pass the budget, not held back to its end.

A handler thread never dies of a failure: results whose commit failed are
kept and reported again after a backoff (exponential, with jitter), and after
an unexpected exception (reported through the `Faults` port) the tasks it had
claimed but not reported are handed back for redelivery, since a local
session never times out.

One handler API with the Python SDK: a handler is `fn(input)` or
`fn(input, ctx)`, where `ctx` is a `TaskContext` with the attributes and
methods of `orbit_sdk.Context` (and, for older handlers, item access to the
assignment: `ctx["step_id"]`); an exception with a string `code` and a bool
`retryable` (`orbit_sdk.TaskError`, this module's `TaskError`, or any class
shaped alike: orbit_core cannot import the SDK) fails the attempt with that
code, as a remote worker's report would. So the same function runs in a
worker process and in-process, under simulated time in a user's tests.
Registered without a runtime, a handler serves its task whatever the step's
`using` (a session of runtime `EVERY_RUNTIME`).
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from orbit_core import events as ev
from orbit_core import limits
from orbit_core.api import Assignment
from orbit_core.dispatch import EVERY_RUNTIME
from orbit_core.engine.backoff import Backoff
from orbit_core.errors import OrbitError, StorageError
from orbit_core.jsontypes import JsonValue
from orbit_core.ports import Clock, Faults, RandomSource


class Host(Protocol):
    """The calls in-process handlers make as a worker would, and those of
    their local session (registered as one, given more contracts), which
    the engine makes as commands: the sessions are `Workers`'."""

    clock: Clock

    def register_local(
        self, worker_id: str, runtime: str, contracts: list[tuple[str, str]]
    ) -> str: ...

    def serve(self, session_id: str, contracts: list[tuple[str, str]]) -> None: ...

    def poll(
        self,
        session_id: str,
        wait_ms: int | None = None,
        connected: Callable[[], bool] | None = None,
    ) -> Assignment | None: ...

    def undelivered(self, token: str) -> None: ...


BATCH_BUDGET_S = 0.002
MAX_BATCH = 128

# A task's result: (token, output, error or None).
Report = tuple[str, JsonValue, "ev.ErrorJson | None"]
# Reports results and claims up to `limit` tasks, waiting up to `wait_ms`.
Exchange = Callable[[str, list[Report], int, int], list[Assignment]]
# An in-process handler: `fn(input)` or `fn(input, task)`; it returns the
# task's output (checked as any worker's output is).
Handler = Callable[..., object]


class TaskError(Exception):
    """Raised by an in-process handler to fail its attempt with a code."""

    def __init__(
        self, code: str, message: str = "", retryable: bool = True, details: JsonValue = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details


_LOG = logging.getLogger("orbit")


class TaskContext:
    """The second argument of an in-process handler: what `orbit_sdk.Context`
    tells a handler in a worker, with times on the engine's clock.

    `cancelled` is an Event, as in the SDK; in-process attempts are not told
    of cancellations (a handler runs to its end, and its result is ignored
    if the attempt is no longer wanted). A context is made for every task, so
    its fields are read from the assignment when asked for, and the Event is
    made on first use (it costs a Condition and two locks).
    """

    __slots__ = ("_cancelled", "_clock", "_task")

    def __init__(self, task: Mapping[str, Any], clock: Callable[[], int]) -> None:
        self._task = task
        self._clock = clock
        self._cancelled: threading.Event | None = None

    @property
    def token(self) -> str:
        return str(self._task["token"])

    @property
    def execution_id(self) -> str:
        return str(self._task.get("execution_id", ""))

    @property
    def workflow(self) -> str:
        return str(self._task.get("workflow", ""))

    @property
    def workflow_version(self) -> str:
        return str(self._task.get("workflow_version", ""))

    @property
    def step_id(self) -> str:
        return str(self._task.get("step_id", ""))

    @property
    def task_name(self) -> str:
        return str(self._task.get("task_name", ""))

    @property
    def attempt(self) -> int:
        return int(self._task.get("attempt", 1))

    @property
    def idempotency_key(self) -> str:
        return str(self._task.get("idempotency_key", ""))

    @property
    def redelivery(self) -> bool:
        return bool(self._task.get("redelivery", False))

    @property
    def deadline_ms(self) -> int | None:
        deadline = self._task.get("deadline_ms")
        return None if deadline is None else int(deadline)

    @property
    def cancelled(self) -> threading.Event:
        if self._cancelled is None:
            self._cancelled = threading.Event()
        return self._cancelled

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled is not None and self._cancelled.is_set()

    def remaining_ms(self) -> int | None:
        """Milliseconds until deadline_ms on the engine's clock, or None."""
        deadline = self.deadline_ms
        if deadline is None:
            return None
        return max(0, deadline - self._clock())

    def log(self, message: str, /, **fields: Any) -> None:
        """Logs `message {json}` at INFO on the `orbit` logger, as the SDK does."""
        if _LOG.isEnabledFor(logging.INFO):
            identity: dict[str, Any] = {
                "execution_id": self.execution_id,
                "step": self.step_id,
                "attempt": self.attempt,
            }
            _LOG.info("%s %s", message, json.dumps({**identity, **fields}, default=str))

    def __getitem__(self, key: str) -> Any:
        """The assignment's fields, for handlers written as `fn(input, task)`."""
        return self._task[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._task.get(key, default)

    def __repr__(self) -> str:
        return (
            f"TaskContext(execution_id={self.execution_id!r}, step_id={self.step_id!r}, "
            f"attempt={self.attempt}, task_name={self.task_name!r})"
        )


def task_error_of(exc: BaseException) -> TaskError | None:
    """`exc` as a TaskError when it is shaped like one (`orbit_sdk.TaskError`
    included): a string `code` and a bool `retryable`."""
    if isinstance(exc, TaskError):
        return exc
    code = getattr(exc, "code", None)
    retryable = getattr(exc, "retryable", None)
    if not isinstance(code, str) or not isinstance(retryable, bool):
        return None
    message = getattr(exc, "message", None)
    if not isinstance(message, str):
        message = str(exc)
    return TaskError(code, message, retryable, getattr(exc, "details", None))


class Handlers:
    def __init__(
        self,
        *,
        host: Host,
        exchange: Exchange,
        threads: int,
        spawn: Callable[[Callable[[], None], str], None],
        stop: threading.Event,
        faults: Faults,
        random: RandomSource,
    ) -> None:
        self._engine = host
        self._exchange = exchange
        self.threads = threads
        self._spawn = spawn
        self._stop = stop
        self._faults = faults
        self._random = random
        self._started = False
        self._handlers: dict[tuple[str, str], tuple[Handler, bool]] = {}
        # One local worker session per runtime: its id.
        self._local: dict[str, str] = {}
        # Tokens `run_all` could not report, to hand back for redelivery.
        self._lost: list[str] = []

    def register(self, task_name: str, version: str, fn: Handler, runtime: str | None) -> None:
        takes_task = len(inspect.signature(fn).parameters) >= 2
        self._handlers[(task_name, version)] = (fn, takes_task)
        runtime = EVERY_RUNTIME if runtime is None else runtime.lower()
        session_id = self._local.get(runtime)
        contracts = sorted(k for k in self._handlers)
        if session_id is None:
            # Python code in this process, whatever runtime the steps name.
            name = "python" if runtime == EVERY_RUNTIME else runtime
            session_id = self._engine.register_local(f"in-process-{name}", runtime, contracts)
            self._local[runtime] = session_id
            if self.threads > 0 and not self._started:
                self._started = True
                for i in range(self.threads):
                    self._spawn(self._loop, f"orbit-handler-{i}")
        else:
            self._engine.serve(session_id, contracts)

    def run_all(self) -> int:
        """Runs queued tasks on the calling thread, one at a time, until none
        is left (or the engine refuses). A result that cannot be recorded
        hands its attempt back for redelivery, as a crashed worker would."""
        ran = 0
        try:
            self._hand_back(self._lost)
            progress = True
            while progress:
                progress = False
                for session_id in list(self._local.values()):
                    task = self._engine.poll(session_id, 0)
                    if task is None:
                        continue
                    ran += 1
                    progress = True
                    report = self._run(task)
                    if report is None:
                        continue
                    try:
                        self._exchange(session_id, [report], 0, 0)
                    except OrbitError:
                        self._lost.append(report[0])
        except OrbitError:
            pass  # reported where it failed; the next run goes on
        return ran

    def _loop(self) -> None:
        limit = 1
        # Results not reported yet, by session: kept when the group that
        # carried them failed to commit, since local sessions never time out.
        unreported: dict[str, list[Report]] = {}
        # Tokens claimed and never run or reported, to hand back.
        lost: list[str] = []
        backoff = Backoff(self._random)
        failed = False
        while not self._stop.is_set():
            sessions = list(self._local.values())
            wait = 1000 if len(sessions) == 1 else 100
            for sid in sessions:
                # With one session, keep exchanging results for tasks while
                # there are any; with several, report and move on.
                want = limit
                claimed: list[Assignment] = []
                try:
                    if lost:
                        self._hand_back(lost)
                    while True:
                        reports = unreported.setdefault(sid, [])
                        tasks = self._exchange(sid, reports, want, 0 if reports else wait)
                        reports.clear()
                        backoff.reset()
                        if failed:
                            failed = False
                            self._faults.recovered("handler")
                        if not tasks:
                            break
                        claimed = tasks
                        per_task = self._run_batch(sid, tasks, reports)
                        claimed = []
                        limit = _batch_size(per_task)
                        want = limit if len(sessions) == 1 else 0
                except StorageError:
                    # The group was rolled back: report again, later.
                    self._stop.wait(backoff.next_s())
                except OrbitError:
                    # Refused for good (reported where it failed): the
                    # attempts go back to the queue rather than stay held.
                    lost.extend(report[0] for report in unreported.pop(sid, ()))
                    self._stop.wait(backoff.next_s())
                except Exception as exc:
                    self._faults.report("handler", exc)
                    failed = True
                    done = {report[0] for report in unreported.get(sid, ())}
                    lost.extend(t["token"] for t in claimed if t["token"] not in done)
                    self._stop.wait(backoff.next_s())

    def _hand_back(self, lost: list[str]) -> None:
        """Has the attempts of tokens claimed but never run redelivered."""
        while lost:
            self._engine.undelivered(lost[-1])
            lost.pop()

    def _run_batch(self, sid: str, tasks: list[Assignment], reports: list[Report]) -> float:
        """Runs claimed tasks into `reports`; returns the seconds per task.
        When a batch turns out slow, what is done is reported at once rather
        than after the rest of the batch."""
        spent = 0.0
        since_report = 0.0
        for task in tasks:
            started = time.perf_counter()
            report = self._run(task)
            took = time.perf_counter() - started
            spent += took
            since_report += took
            if report is not None:
                reports.append(report)
            if reports and since_report > BATCH_BUDGET_S and task is not tasks[-1]:
                try:
                    self._exchange(sid, reports, 0, 0)
                except StorageError:
                    continue  # kept: reported with the next exchange
                except OrbitError:
                    pass
                reports.clear()
                since_report = 0.0
        return spent / len(tasks)

    def _run(self, task: Assignment) -> Report | None:
        handler = self._handlers.get((task["task_name"] or "", task["contract_version"] or ""))
        if handler is None:
            return None
        fn, takes_task = handler
        token = task["token"]
        try:
            if takes_task:
                output = fn(task["input"], TaskContext(task, self._engine.clock.now_ms))
            else:
                output = fn(task["input"])
        except Exception as exc:
            failure = task_error_of(exc)
            if failure is not None:
                if not failure.code:
                    return None  # nothing to report: the attempt is redelivered
                return token, None, _task_error(failure)
            error = ev.make_error(
                "UNHANDLED_EXCEPTION",
                _storable(f"{type(exc).__name__}: {exc}"),
                True,
                {"traceback": _storable(traceback.format_exc())},
            )
            return token, None, error
        try:
            # Checked here, as a remote worker's output is on arrival: a value
            # the store cannot write would fail the whole commit group.
            limits.check_json(output)
        except limits.JsonShapeError as bad:
            message = f"task output is invalid at {bad}"
            return token, None, ev.make_error("OUTPUT_CONTRACT_VIOLATION", message, False)
        return token, output, None  # type: ignore[return-value]  # checked just above


def _storable(text: str) -> str:
    """`text` without lone surrogates (an exception's message may hold any)."""
    return text.encode("utf-8", "replace").decode()


def _task_error(exc: TaskError) -> ev.ErrorJson:
    """The attempt's error; details that are not storable JSON are dropped
    and the message says why."""
    try:
        limits.check_json(exc.details)
        limits.admit_strings("INVALID_REQUEST", error_code=exc.code, error_message=exc.message)
    except limits.JsonShapeError as bad:
        message = f"{exc.message} (details dropped: invalid at {bad})"
        return ev.make_error(exc.code, message, exc.retryable)
    except OrbitError as bad:
        return ev.make_error("UNHANDLED_EXCEPTION", f"TaskError: {bad.message}", True)
    return ev.make_error(exc.code, exc.message, exc.retryable, exc.details)


def _batch_size(seconds_per_task: float) -> int:
    if seconds_per_task <= 0:
        return MAX_BATCH
    return max(1, min(MAX_BATCH, int(BATCH_BUDGET_S / seconds_per_task)))
