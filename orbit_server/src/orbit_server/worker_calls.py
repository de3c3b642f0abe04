"""The worker protocol's calls, whatever the binding (chapter 68).

HTTP/JSON (`resources/workers.py`) and gRPC (`grpc_server.py`) each read a
request their own way, authenticate the caller, and then make the same call
here; what a call does (the per-worker identity's registration rules, the
engine call with the worker id the credential is bound to, the log lines,
the trace context of a task) is written once. A binding only translates
values and errors.

Protocol extensions (docs/worker-protocol.md) are ORBIT's, beyond the book.
A worker names those it can use when it registers and the answer lists the
ones this server offers among them; a worker that names none (any worker
written to the book) gets the book's answer, field for field.

`result-then-poll` lets a result carry the poll that would follow it, so a
step costs one request instead of two. The result is reported exactly as on
its own (its answer, accepted or not, is the one it would have had) and
only then is the poll made; a result the engine refuses raises before any
poll, so no task is ever taken for an answer that is an error. A poll that
fails once the result is recorded (an unknown session, say) is not the
result's error: the answer carries the acknowledgement and the poll's
error, and the worker's own next poll meets that error as usual. The
engine makes the two as one command (`complete_then_poll`,
`fail_then_poll` of its worker desk): one group and one commit per step.

The worker loop (worker_loop.py) makes the hot calls without waiting on
them: `*_call` returns the desk's `DeskCall` (only for an engine whose desk
is a `WorkerDesk`: `batched`), and `found` reads its answer as the blocking
calls return it.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NotRequired, TypeVar

import attrs

from orbit_core import limits
from orbit_core.api import Accepted, Assignment, HeartbeatReply, Registered
from orbit_core.engine.facade import EngineApi
from orbit_core.engine.worker_desk import DeskCall, PollAfter, Reported, WorkerDesk
from orbit_core.errors import InvalidError, OrbitError
from orbit_core.jsontypes import JsonValue
from orbit_server.auth import Caller, bound_worker, check_register
from orbit_server.contract_check import ContractCheck, Presented
from orbit_server.deployed import DeployedContracts
from orbit_server.logs import logger
from orbit_server.task_use import TaskUse
from orbit_server.telemetry import Tracing

_log = logger()
_SESSIONS_KEPT = 10_000
RESULT_THEN_POLL = "result-then-poll"


class RegisteredWith(Registered):
    """A registration's answer; `extensions` only when the worker asked."""

    extensions: NotRequired[list[str]]


@attrs.frozen(slots=True)
class NextPoll:
    """The poll a result carries (`result-then-poll`)."""

    session: str
    wait_ms: int | None


@attrs.frozen(slots=True)
class ThenPolled:
    """What a result's poll found: the task, None when none came within the
    wait, or the poll's error (then no task was taken)."""

    task: Mapping[str, Any] | None = None
    error: OrbitError | None = None


class WorkerCalls:
    """One per server, shared by its bindings."""

    def __init__(
        self,
        engine: EngineApi,
        tracer: Tracing | None = None,
        extensions: Iterable[str] = (RESULT_THEN_POLL,),
    ) -> None:
        self.engine = engine
        # The protocol extensions offered.
        self.extensions = tuple(extensions)
        self.result_then_poll = RESULT_THEN_POLL in self.extensions
        # With tracing on, a task carries its attempt's span as `traceparent`.
        self._tracer = tracer
        # Session -> worker id, for the "worker unregistered" line.
        self._sessions: OrderedDict[str, str] = OrderedDict()
        # Which announced tasks no deployed workflow calls (shared with GET /v1/workers).
        deployed = DeployedContracts()
        self.task_use = TaskUse(deployed)
        self._contracts = ContractCheck(engine, deployed)

    def register(
        self,
        who: Caller,
        worker_id: str,
        runtime: str,
        contracts: list[dict[str, str]],
        sdk: str | None,
        *,
        presented: list[Presented] | None = None,
        asked: Iterable[str] | None = None,
    ) -> RegisteredWith:
        """`presented`: the contract hashes the worker announced (typed
        workers); one that differs from the deployed contract refuses the
        registration with CONTRACT_MISMATCH (contract_check.py). `asked`:
        the extensions the worker can use, None when it named none (the
        answer then has no `extensions` field)."""
        check_register(who, worker_id, runtime, (c["task_name"] for c in contracts))
        try:
            self._contracts.check(presented or [])
        except OrbitError as exc:
            _log.warning("worker refused", worker_id=worker_id, code=exc.code, error=exc.message)
            raise
        answer = self.engine.workers.register(worker_id, runtime, contracts, sdk)
        session = answer.get("worker_session_id")
        if isinstance(session, str):
            if len(self._sessions) >= _SESSIONS_KEPT:  # sessions lost without unregistering
                with contextlib.suppress(KeyError):
                    self._sessions.popitem(last=False)
            self._sessions[session] = worker_id
        _log.info(
            "worker registered",
            worker_id=worker_id,
            runtime=runtime.lower(),
            tasks=len(contracts),  # a count, as chapter 46 logs it
        )
        self._warn_unused(worker_id, contracts)
        registered = RegisteredWith(
            accepted=answer["accepted"],
            worker_session_id=answer["worker_session_id"],
            heartbeat_interval_ms=answer["heartbeat_interval_ms"],
            session_timeout_ms=answer["session_timeout_ms"],
            warnings=answer["warnings"],
        )
        if asked is not None:
            wanted = set(asked)
            registered["extensions"] = [name for name in self.extensions if name in wanted]
        return registered

    def _warn_unused(self, worker_id: str, contracts: list[dict[str, str]]) -> None:
        """A task nobody calls is usually a typo or a stale version: its steps would wait."""
        try:
            unused = self.task_use.unused(self.engine, contracts)
        except OrbitError:
            return  # the catalog could not be read; the registration stands
        if unused:
            _log.warning(
                "worker registered tasks no deployed workflow calls",
                worker_id=worker_id,
                tasks=", ".join(u.text() for u in unused),
            )

    def heartbeat(self, who: Caller, session: str) -> HeartbeatReply:
        return self.engine.workers.heartbeat(session, worker=bound_worker(who))

    def poll(
        self,
        who: Caller,
        session: str,
        wait_ms: int | None,
        connected: Callable[[], bool] | None,
    ) -> Mapping[str, Any] | None:
        """The task (with its `traceparent` when traces are exported), or
        None when none came within the wait."""
        return self._traced(
            self.engine.workers.poll(session, wait_ms, connected, worker=bound_worker(who))
        )

    def _traced(self, task: Assignment | None) -> Mapping[str, Any] | None:
        """A task with its `traceparent` when traces are exported."""
        if task is None or self._tracer is None:
            return task
        parent = self._tracer.traceparent(task["execution_id"], task["step_id"])
        return task if parent is None else {**task, "traceparent": parent}

    def _polled(self, reported: Reported) -> tuple[Accepted, ThenPolled]:
        if reported.error is not None:
            return reported.ack, ThenPolled(error=reported.error)
        return reported.ack, ThenPolled(self._traced(reported.task))

    def undelivered(self, task: Assignment | Mapping[str, Any]) -> None:
        """The worker hung up before its task reached it: the attempt is
        redelivered now rather than after the session timeout."""
        _log.warning(
            "task not delivered: the worker hung up",
            execution_id=task["execution_id"],
            step=task["step_id"],
            attempt=task["attempt"],
        )
        try:
            self.engine.workers.undelivered(task["token"])
        except OrbitError as exc:  # closing down: the session timeout covers it
            _log.warning("cannot mark the attempt uncertain", error=exc.message)

    def unregister(self, who: Caller, session: str) -> Accepted:
        answer = self.engine.workers.unregister(session, worker=bound_worker(who))
        _log.info("worker unregistered", worker_id=self._sessions.pop(session, None))
        return answer

    def complete(self, who: Caller, token: str, output: JsonValue) -> Accepted:
        worker = bound_worker(who)
        desk = self.engine.workers
        return _widening(output, lambda out: desk.complete(token, out, worker=worker))

    def complete_then_poll(
        self,
        who: Caller,
        token: str,
        output: JsonValue,
        poll: NextPoll,
        connected: Callable[[], bool] | None,
    ) -> tuple[Accepted, ThenPolled]:
        """`complete`, then the poll it carried (`result-then-poll`)."""
        worker = bound_worker(who)
        desk = self.engine.workers
        after = PollAfter(poll.session, poll.wait_ms, connected)
        return self._polled(
            _widening(output, lambda out: desk.complete_then_poll(token, out, after, worker=worker))
        )

    def fail(
        self,
        who: Caller,
        token: str,
        *,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
    ) -> Accepted:
        return self.engine.workers.fail(
            token, error_code, error_message, retryable, details, worker=bound_worker(who)
        )

    def fail_then_poll(
        self,
        who: Caller,
        token: str,
        *,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
        poll: NextPoll,
        connected: Callable[[], bool] | None,
    ) -> tuple[Accepted, ThenPolled]:
        """`fail`, then the poll it carried (`result-then-poll`)."""
        after = PollAfter(poll.session, poll.wait_ms, connected)
        return self._polled(
            self.engine.workers.fail_then_poll(
                token,
                error_code,
                error_message,
                retryable,
                details,
                poll=after,
                worker=bound_worker(who),
            )
        )

    # ---- the worker loop's calls (module docstring)

    @property
    def batched(self) -> WorkerDesk | None:
        """The desk that makes calls without waiting on them, or None when
        the engine's desk cannot (a shared server's)."""
        desk = self.engine.workers
        return desk if isinstance(desk, WorkerDesk) else None

    def poll_call(
        self, who: Caller, session: str, wait_ms: int | None, connected: Callable[[], bool] | None
    ) -> DeskCall:
        desk = self.batched
        assert desk is not None
        return desk.poll_call(session, wait_ms, connected, worker=bound_worker(who))

    def complete_then_poll_call(
        self,
        who: Caller,
        token: str,
        output: JsonValue,
        poll: NextPoll,
        connected: Callable[[], bool] | None,
    ) -> DeskCall:
        desk = self.batched
        assert desk is not None
        worker = bound_worker(who)
        after = PollAfter(poll.session, poll.wait_ms, connected)
        return _widening(
            output, lambda out: desk.complete_then_poll_call(token, out, after, worker=worker)
        )

    def complete_call(self, who: Caller, token: str, output: JsonValue) -> DeskCall:
        desk = self.batched
        assert desk is not None
        worker = bound_worker(who)
        return _widening(output, lambda out: desk.complete_call(token, out, worker=worker))

    def fail_call(
        self,
        who: Caller,
        token: str,
        *,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
    ) -> DeskCall:
        desk = self.batched
        assert desk is not None
        return desk.fail_call(
            token, error_code, error_message, retryable, details, worker=bound_worker(who)
        )

    def fail_then_poll_call(
        self,
        who: Caller,
        token: str,
        *,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
        poll: NextPoll,
        connected: Callable[[], bool] | None,
    ) -> DeskCall:
        desk = self.batched
        assert desk is not None
        after = PollAfter(poll.session, poll.wait_ms, connected)
        return desk.fail_then_poll_call(
            token,
            error_code,
            error_message,
            retryable,
            details,
            poll=after,
            worker=bound_worker(who),
        )

    def found(self, call: DeskCall) -> tuple[Accepted, ThenPolled]:
        """A settled call's answer: the result's ack (for a plain poll,
        ignored) and what the poll found, as the blocking calls answer;
        raises the error they would raise."""
        return self._polled(call.reported())


R = TypeVar("R")


def _widening(output: JsonValue, report: Callable[[JsonValue], R]) -> R:
    """`report(output)`, again with big integers read as floats when the
    output is refused as invalid: an integer from 2^63 to 2^64 - 1 is
    refused where a larger one, which the JSON parser already made a float,
    is judged by the contract (and over gRPC every such number is a float)
    (docs/limits.md). Nothing was recorded: the engine checks an output
    before submitting it."""
    try:
        return report(output)
    except InvalidError:
        widened = limits.big_integers_as_floats(output)
        if widened is output:
            raise
        return report(widened)
