"""The worker protocol's calls (`engine.workers`): what a worker process, or
the server speaking for one, asks of the engine. Each call is one command
of the group-commit pipeline, like the embedding calls of `Engine`, made
after the same checks on arrival whatever server or binding it came by.

Kept apart from the `Engine` façade because its audience is another one:
the HTTP and gRPC worker routes (orbit_server/worker_calls.py) and the
simulator's workers use it, an embedding program does not (it serves tasks
with `Engine.register_handler`). `WorkerApi` is its shape, which the
desk of a server that shares executions (orbit_core/engine/shared.py)
has too.

A result may carry the poll that follows it (the server's `result-then-poll`
extension): `complete_then_poll` and `fail_then_poll` make both in ONE
command, so a step costs one group, one commit and one wake-up of its
caller instead of two of each. The result runs first, as alone: when it is
refused (an `OrbitError`) the command ends there and no task is taken; the
poll then runs in the same transaction, and its own refusal (an unknown
session, say) is returned beside the result's answer rather than raised,
since the result stands. Both become durable in the same commit, before
the caller hears of either. A desk that cannot join them (a shared
server's, whose results may go to another server) makes the two calls in
turn (`poll_after`).

A caller that serves many workers from one thread (the server's worker
loop) makes the same calls without waiting on them: `*_call` builds the
command of a poll or of a result with its poll (`DeskCall`), `run_calls`
runs a batch of them as one group, and a call whose poll parked is watched
(`watch`: a callback on each change of its state, instead of a blocked
thread) until a later group hands it a task or `expire` ends it. Such a
caller may serve clients' connections as well: `start_call` makes a start's
command (the one `Engine.start` runs) the same way, to run in the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

import attrs

from orbit_core import limits
from orbit_core.api import (
    Accepted,
    Assignment,
    HeartbeatReply,
    Registered,
    StartRequest,
    WorkerList,
)
from orbit_core.engine.commands import PENDING, Command, Parked, Tx, Wake
from orbit_core.engine.pipeline import GroupCommit
from orbit_core.engine.polling import DEFAULT_POLL_MS, MAX_POLL_MS, Polling
from orbit_core.engine.results import Results, admit_failure, admit_success
from orbit_core.engine.workers import Workers
from orbit_core.errors import OrbitError
from orbit_core.jsontypes import JsonValue
from orbit_core.ports import Clock, Store

Contracts = list[dict[str, str]] | list[tuple[str, str]]


def contract_pairs(contracts: Contracts) -> list[tuple[str, str]]:
    """A registration's contracts as (task name, contract version) pairs."""
    return [
        (c["task_name"], c["contract_version"]) if isinstance(c, dict) else (c[0], c[1])
        for c in contracts
    ]


@attrs.frozen(slots=True)
class PollAfter:
    """The poll a result carries: as `poll`'s arguments."""

    session_id: str
    wait_ms: int | None = None
    connected: Callable[[], bool] | None = None


@attrs.frozen(slots=True)
class Reported:
    """A result's answer and what the poll it carried found: the task, None
    when none came within the wait, or the poll's `error` (no task taken)."""

    ack: Accepted
    task: Assignment | None = None
    error: OrbitError | None = None


def poll_after(desk: WorkerApi, ack: Accepted, poll: PollAfter, worker: str | None) -> Reported:
    """The poll a result carried, made on its own once the result is
    answered (for desks that cannot make both in one command)."""
    try:
        task = desk.poll(poll.session_id, poll.wait_ms, poll.connected, worker=worker)
    except OrbitError as exc:
        return Reported(ack, error=exc)
    return Reported(ack, task)


def _wait_of(wait_ms: int | None) -> int:
    """A poll's wait, bounded."""
    return DEFAULT_POLL_MS if wait_ms is None or wait_ms < 0 else min(wait_ms, MAX_POLL_MS)


class DeskCall:
    """A poll, a result, or a result with its poll, made without a waiting
    caller (module docstring). `kind` tells them apart: a plain poll's or
    plain result's refusal is the call's error, a result's poll's refusal
    is beside its ack."""

    __slots__ = ("ack", "cmd", "kind", "wait")

    POLL = "poll"
    RESULT = "result"
    THEN = "result-then-poll"
    # A start (`WorkerDesk.start_call`) made in the same group: its answer is
    # the command's own result or error, not a `Reported`.
    START = "start"

    def __init__(self, cmd: Command, wait: int, kind: str) -> None:
        self.cmd = cmd
        self.wait = wait
        self.kind = kind
        self.ack: Accepted = {"accepted": False}

    @property
    def waiting(self) -> bool:
        """Whether the poll is parked with no answer yet."""
        cmd = self.cmd
        return cmd.parked is not None and not cmd.done and cmd.parked is not Parked.EXPIRED

    def reported(self) -> Reported:
        """The call's answer once it is not `waiting`, as the blocking call
        returns it; raises the error that call would raise."""
        cmd = self.cmd
        if self.kind == DeskCall.RESULT:
            if cmd.error is not None:
                raise cmd.error
            return Reported(cast(Accepted, cmd.result))
        if cmd.error is not None:
            if self.kind == DeskCall.THEN and cmd.parked is not None:
                # The result was durable before its poll parked.
                return Reported(self.ack, error=_orbit_error(cmd.error))
            raise cmd.error
        result = cmd.result
        if isinstance(result, OrbitError):
            return Reported(self.ack, error=result)
        if cmd.parked is not None and not cmd.done:
            return Reported(self.ack)  # expired: no task within the wait
        if result is None or result is PENDING:
            return Reported(self.ack)
        return Reported(self.ack, cast(Assignment, result).copy())


def _orbit_error(error: BaseException) -> OrbitError:
    if isinstance(error, OrbitError):
        return error
    raise error


class WorkerApi(Protocol):
    """The worker calls, as `WorkerDesk` and a shared server's desk serve them."""

    def register(
        self, worker_id: str, runtime: str, contracts: Contracts, sdk: str | None = None
    ) -> Registered: ...

    def poll(
        self,
        session_id: str,
        wait_ms: int | None = None,
        connected: Callable[[], bool] | None = None,
        *,
        worker: str | None = None,
    ) -> Assignment | None: ...

    def undelivered(self, token: str) -> None: ...

    def heartbeat(self, session_id: str, *, worker: str | None = None) -> HeartbeatReply: ...

    def unregister(self, session_id: str, *, worker: str | None = None) -> Accepted: ...

    def complete(
        self, token: str, output: JsonValue = None, *, worker: str | None = None
    ) -> Accepted: ...

    def fail(
        self,
        token: str,
        error_code: str,
        error_message: str = "",
        retryable: bool = True,
        details: JsonValue = None,
        *,
        worker: str | None = None,
    ) -> Accepted: ...

    def complete_then_poll(
        self, token: str, output: JsonValue, poll: PollAfter, *, worker: str | None = None
    ) -> Reported: ...

    def fail_then_poll(
        self,
        token: str,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
        *,
        poll: PollAfter,
        worker: str | None = None,
    ) -> Reported: ...

    def list(self) -> WorkerList: ...


class WorkerDesk:
    """The worker calls of one engine (module docstring)."""

    def __init__(
        self,
        *,
        pipeline: GroupCommit,
        workers: Workers,
        polling: Polling,
        results: Results,
        store: Store,
        clock: Clock,
        draining: Callable[[], bool],
        start: Callable[[StartRequest], Command],
    ) -> None:
        self._pipeline = pipeline
        self._start = start
        self._workers = workers
        self._polling = polling
        self._results = results
        self._store = store
        self._clock = clock
        self._draining = draining

    def register(
        self, worker_id: str, runtime: str, contracts: Contracts, sdk: str | None = None
    ) -> Registered:
        pairs = contract_pairs(contracts)
        limits.admit_strings(
            "INVALID_REQUEST",
            worker_id=worker_id,
            runtime=runtime,
            sdk=sdk,
            contracts=[s for pair in pairs for s in pair],
        )
        return self._pipeline.submit(
            lambda tx: self._workers.register(tx, worker_id, runtime, pairs, sdk)
        )

    def poll(
        self,
        session_id: str,
        wait_ms: int | None = None,
        connected: Callable[[], bool] | None = None,
        *,
        worker: str | None = None,
    ) -> Assignment | None:
        """A task assignment, or None when nothing arrived within `wait_ms`.
        `connected` (from the transport, cheap, never blocking) tells whether
        the worker is still waiting: a parked poll whose worker hung up gets
        no task and ends with None. `worker`, here and in the other worker
        calls, is the worker id the caller's credential is bound to (None
        when it may act for any): another worker's session or task token is
        refused with FORBIDDEN before anything changes."""
        return self.poll_parked(session_id, _wait_of(wait_ms), connected, worker, None)

    def poll_parked(
        self,
        session_id: str,
        wait: int,
        connected: Callable[[], bool] | None,
        worker: str | None,
        parked: Callable[[Callable[[], bool]], None] | None,
    ) -> Assignment | None:
        """`poll` with its wait already bounded; once the poll waits,
        `parked` (if given) receives the function that takes it back
        (engine/handoff.py)."""
        if self._draining():
            wait = 0
        cmd = Command(lambda tx: self._polling.poll(tx, session_id, cmd, wait > 0, worker))
        cmd.connected = connected
        result = self._pipeline.run(cmd)
        if cmd.parked is None:
            return cast(Assignment, result).copy() if result is not None else None
        if parked is not None:
            parked(lambda: self._pipeline.expire(cmd))
        if self._pipeline.await_parked(cmd, wait):
            return cast(Assignment, cmd.result).copy()
        return None

    def undelivered(self, token: str) -> None:
        """Tells the engine that the assignment for `token` could not be sent
        to its worker: the attempt becomes uncertain at once and is
        redelivered. Nothing happens if the attempt is no longer in flight."""
        self._pipeline.submit(lambda tx: self._workers.undelivered(tx, token))

    def heartbeat(self, session_id: str, *, worker: str | None = None) -> HeartbeatReply:
        return self._pipeline.submit(lambda tx: self._workers.heartbeat(tx, session_id, worker))

    def unregister(self, session_id: str, *, worker: str | None = None) -> Accepted:
        return self._pipeline.submit(lambda tx: self._workers.unregister(tx, session_id, worker))

    def complete(
        self, token: str, output: JsonValue = None, *, worker: str | None = None
    ) -> Accepted:
        """Reports a success: `{"accepted": bool, "reason"?}`."""
        admit_success(token, output)
        return self._pipeline.submit(lambda tx: self._results.complete(tx, token, output, worker))

    def fail(
        self,
        token: str,
        error_code: str,
        error_message: str = "",
        retryable: bool = True,
        details: JsonValue = None,
        *,
        worker: str | None = None,
    ) -> Accepted:
        error = admit_failure(token, error_code, error_message, retryable, details)
        return self._pipeline.submit(lambda tx: self._results.fail(tx, token, error, worker))

    def complete_then_poll(
        self, token: str, output: JsonValue, poll: PollAfter, *, worker: str | None = None
    ) -> Reported:
        """`complete`, then `poll`, as one command (module docstring)."""
        return self._then_poll(self.complete_then_poll_call(token, output, poll, worker=worker))

    def fail_then_poll(
        self,
        token: str,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
        *,
        poll: PollAfter,
        worker: str | None = None,
    ) -> Reported:
        """`fail`, then `poll`, as one command (module docstring)."""
        call = self.fail_then_poll_call(
            token, error_code, error_message, retryable, details, poll=poll, worker=worker
        )
        return self._then_poll(call)

    def _then_poll(self, call: DeskCall) -> Reported:
        """Runs a result-then-poll call's command and waits for its poll."""
        cmd = call.cmd
        result = self._pipeline.run(cmd)
        if isinstance(result, OrbitError):
            return Reported(call.ack, error=result)
        if cmd.parked is None:
            return Reported(
                call.ack, cast(Assignment, result).copy() if result is not None else None
            )
        # Parked: the result is durable (its group committed); the poll waits.
        try:
            found = self._pipeline.await_parked(cmd, call.wait)
        except OrbitError as exc:
            return Reported(call.ack, error=exc)
        return Reported(call.ack, cast(Assignment, cmd.result).copy() if found else None)

    # ---- calls made without a waiting caller (module docstring)

    def poll_call(
        self,
        session_id: str,
        wait_ms: int | None,
        connected: Callable[[], bool] | None,
        *,
        worker: str | None = None,
    ) -> DeskCall:
        """`poll`'s command, to run with `run_calls`."""
        wait = 0 if self._draining() else _wait_of(wait_ms)
        cmd = Command(lambda tx: self._polling.poll(tx, session_id, cmd, wait > 0, worker))
        cmd.connected = connected
        return DeskCall(cmd, wait, DeskCall.POLL)

    def complete_call(
        self, token: str, output: JsonValue, *, worker: str | None = None
    ) -> DeskCall:
        """`complete`'s command; refuses an invalid output at once."""
        admit_success(token, output)
        cmd = Command(lambda tx: self._results.complete(tx, token, output, worker))
        return DeskCall(cmd, 0, DeskCall.RESULT)

    def fail_call(
        self,
        token: str,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
        *,
        worker: str | None = None,
    ) -> DeskCall:
        """`fail`'s command; refuses an invalid failure at once."""
        error = admit_failure(token, error_code, error_message, retryable, details)
        cmd = Command(lambda tx: self._results.fail(tx, token, error, worker))
        return DeskCall(cmd, 0, DeskCall.RESULT)

    def complete_then_poll_call(
        self, token: str, output: JsonValue, poll: PollAfter, *, worker: str | None = None
    ) -> DeskCall:
        """`complete_then_poll`'s command; refuses an invalid output at once."""
        admit_success(token, output)
        return self._then_poll_call(
            lambda tx: self._results.complete(tx, token, output, worker), poll, worker
        )

    def fail_then_poll_call(
        self,
        token: str,
        error_code: str,
        error_message: str,
        retryable: bool,
        details: JsonValue,
        *,
        poll: PollAfter,
        worker: str | None = None,
    ) -> DeskCall:
        """`fail_then_poll`'s command; refuses an invalid failure at once."""
        error = admit_failure(token, error_code, error_message, retryable, details)
        return self._then_poll_call(
            lambda tx: self._results.fail(tx, token, error, worker), poll, worker
        )

    def _then_poll_call(
        self, report: Callable[[Tx], Accepted], poll: PollAfter, worker: str | None
    ) -> DeskCall:
        wait = 0 if self._draining() else _wait_of(poll.wait_ms)

        def run(tx: Tx) -> object:
            call.ack = report(tx)  # refused: the command's error, and no poll
            try:
                return self._polling.poll(tx, poll.session_id, cmd, wait > 0, worker)
            except OrbitError as exc:
                # Raised before the poll changed anything; the result stands.
                return exc

        cmd = Command(run)
        cmd.connected = poll.connected
        call = DeskCall(cmd, wait, DeskCall.THEN)
        return call

    def start_call(self, request: StartRequest) -> DeskCall:
        """A start's command, to run among `run_calls`' batch; its answer is
        the command's result or error (`DeskCall.START`). Raises at once for
        what `Engine.start` refuses before any command."""
        return DeskCall(self._start(request), 0, DeskCall.START)

    def run_calls(self, calls: list[DeskCall]) -> None:
        """Runs the calls' commands as one group (as far as the pipeline
        lets them) and returns once each is answered or parked."""
        self._pipeline.run_all([call.cmd for call in calls])

    def watch(self, call: DeskCall, changed: Callable[[], None]) -> None:
        """From now on `changed` is called (on any thread, so it must not
        block) whenever the parked call may have an answer: a task, its
        expiry, an error. Called at once if that happened already."""
        cmd = call.cmd
        pipeline = self._pipeline
        with pipeline.lock:
            cmd.event = Wake(changed)
            now = cmd.done or cmd.parked is not Parked.WAITING
        if now:
            changed()

    def expire(self, call: DeskCall) -> bool:
        """Ends a parked call's wait; False when a group already claimed it
        (its task then comes through `watch`)."""
        return self._pipeline.expire(call.cmd)

    def list(self) -> WorkerList:
        """`GET /v1/workers`: every registered worker with its live sessions."""
        rows = self._pipeline.submit(lambda tx: self._store.list_workers(), read=True)
        return self._workers.describe(rows, self._clock.now_ms())
