"""Handing queued tasks to workers: polls, answered at once or parked as long
polls until a group queues a matching task, and the dispatch of an attempt."""

from __future__ import annotations

from collections import deque

from orbit_core import events as ev
from orbit_core.api import (
    UNIT_SCHEDULED,
    Assignment,
)
from orbit_core.dispatch import QueuedTask, Session
from orbit_core.engine.commands import Command, Parked, Tx
from orbit_core.engine.executions import Executions
from orbit_core.engine.pipeline import GroupCommit
from orbit_core.engine.workers import Workers

DEFAULT_POLL_MS = 20_000
MAX_POLL_MS = 60_000


class Polling:
    def __init__(self, executions: Executions, workers: Workers, pipeline: GroupCommit) -> None:
        self._x = executions
        self._workers = workers
        self._pipeline = pipeline
        self._pollers: deque[Command] = deque()

    def poll(
        self, tx: Tx, session_id: str, cmd: Command, may_wait: bool, worker: str | None = None
    ) -> object:
        """A task for the session, or None, or PENDING once parked."""
        session = self._workers.session(tx, session_id, worker)
        task = self._next_task(session)
        if task is not None:
            return self._dispatch(tx, session, task)
        if not may_wait:
            return None
        cmd.session = session
        return self._park(cmd)

    def _park(self, cmd: Command) -> object:
        pending = self._pipeline.park(cmd)
        pollers = self._pollers
        while pollers and pollers[0].parked is not Parked.WAITING:
            pollers.popleft()  # polls that timed out while nothing was queued
        pollers.append(cmd)
        return pending

    def claim(self, tx: Tx, session_id: str, cmd: Command, limit: int, may_wait: bool) -> object:
        """Up to `limit` tasks for the session (a list, oldest first), or
        PENDING once parked until a group queues some."""
        if limit <= 0:
            return []
        session = self._workers.session(tx, session_id)
        tasks = self._take(tx, session, limit)
        if tasks or not may_wait:
            return tasks
        cmd.session = session
        cmd.want = limit
        return self._park(cmd)

    @property
    def waiting(self) -> bool:
        return bool(self._pollers)

    def match(self, tx: Tx) -> None:
        """Hands newly queued tasks to parked long polls."""
        if not self._pollers:
            return
        still: deque[Command] = deque()
        # The queue only loses tasks while polls are matched: once no task
        # fits a kind of worker, none fits the polls of its other workers
        # (many workers of one kind each park a poll when the queue is dry).
        dry: set[tuple[tuple[tuple[str, str], ...], str]] = set()
        while self._pollers:
            cmd = self._pollers.popleft()
            session = self._waiting_session(cmd)
            if session is None:
                self._pipeline.expire(cmd)
                continue
            kind = (session.contracts, session.runtime)
            if kind in dry or not self._x.index.has(
                session.contracts, session.runtime, self._valid_task
            ):
                dry.add(kind)
                still.append(cmd)
                continue
            if self._hung_up(cmd):
                continue  # a task handed to it would go nowhere
            # Claimed before a task is taken, so no task is lost to a poll
            # that expires meanwhile.
            if not self._pipeline.claim(cmd):
                continue
            session.last_seen_ms = max(session.last_seen_ms, tx.now)
            if cmd.want is None:
                task = self._next_task(session)
                assert task is not None
                cmd.result = self._dispatch(tx, session, task)
            else:
                cmd.result = self._take(tx, session, cmd.want)
            tx.claimed.append(cmd)
        self._pollers = still

    def keep_alive(self, tx: Tx) -> None:
        """A worker waiting in a long poll is connected, not silent: its
        session counts as seen now. Polls whose worker hung up end here
        instead, so silence detection still finds workers that stopped."""
        if not self._pollers:
            return
        still: deque[Command] = deque()
        for cmd in self._pollers:
            session = self._waiting_session(cmd)
            if session is None:
                # Its session ended (the worker unregistered): the poll ends
                # now, with no task, and no longer holds its thread, nor a
                # shutdown, which only ends the polls queued here.
                self._pipeline.expire(cmd)
                continue
            if self._hung_up(cmd):
                continue
            session.last_seen_ms = max(session.last_seen_ms, tx.now)
            still.append(cmd)
        self._pollers = still

    def _waiting_session(self, cmd: Command) -> Session | None:
        """The session of a poll that still waits; None once the poll ended
        or its session is gone (the poll is then ended and dropped from the
        queue)."""
        session = cmd.session
        if cmd.parked is not Parked.WAITING or session is None:
            return None
        return session if session.session_id in self._workers.sessions else None

    def _hung_up(self, cmd: Command) -> bool:
        """Whether the transport says the poll's worker is gone; such a poll
        ends at once, with no task."""
        if cmd.connected is None or cmd.connected():
            return False
        self._pipeline.expire(cmd)
        return True

    def expire_all(self) -> None:
        """Ends every parked long poll with no task (on close)."""
        with self._pipeline.lock:
            parked = list(self._pollers)
            self._pollers.clear()
        for cmd in parked:
            self._pipeline.expire(cmd)

    def _take(self, tx: Tx, session: Session, limit: int) -> list[Assignment]:
        tasks: list[Assignment] = []
        while len(tasks) < limit:
            task = self._next_task(session)
            if task is None:
                break
            tasks.append(self._dispatch(tx, session, task))
        return tasks

    def _next_task(self, session: Session) -> QueuedTask | None:
        return self._x.index.pop(session.contracts, session.runtime, self._valid_task)

    def _valid_task(self, task: QueuedTask) -> bool:
        live = self._x.memory.get(task.execution_id)
        if live is None or live.state.terminal or live.state.paused_at_ms is not None:
            # A paused execution's tasks are queued again when it resumes.
            return False
        unit = live.state.units.get(task.unit_key)
        return (
            unit is not None
            and unit.status == UNIT_SCHEDULED
            and unit.offer_seq == task.offer_seq
            and not self._x.gate.holds_back(live, task.unit_key)
        )

    def dispatch_offer(
        self, tx: Tx, session: Session, *, execution_id: str, key: str, offer: int, token: str
    ) -> Assignment | None:
        """Records the dispatch of a task another component claimed (a
        shared queue's row) under `token`; None when the unit no longer
        waits for exactly that offer."""
        task = QueuedTask(0, execution_id, key, offer)
        if not self._valid_task(task):
            return None
        return self._dispatch(tx, session, task, token)

    def _dispatch(
        self, tx: Tx, session: Session, task: QueuedTask, token: str | None = None
    ) -> Assignment:
        x = self._x
        live = x.memory.get(task.execution_id)
        assert live is not None  # _valid_task checked it
        state = live.state
        unit = state.units[task.unit_key]
        spec = live.plan.spec(task.unit_key)
        assert spec is not None
        if token is None:
            token = x.ids.token()
            if x.shared:  # (for a result sent to another server)
                token = f"{state.id}/{token}"
        timeout = spec.timeout_ms
        deadline = None if timeout is None else tx.now + timeout
        x.gate.dispatched(tx, live, unit.key)  # (a step's rate: in this group)
        x.record(
            tx,
            live,
            ev.StepDispatched,
            unit.key,
            unit.attempt,
            token,
            session.worker_id,
            session.session_id,
            deadline,
        )
        x.memory.hold(token, state.id, unit.key, unit.attempt)
        self._workers.hold(session, token)
        if live.plan.timed:
            x.push_due(live)
        assignment: Assignment = {
            "token": token,
            "execution_id": state.id,
            "workflow": state.workflow,
            "workflow_version": state.version,
            "step_id": unit.key,
            "task_name": spec.task,
            "contract_version": spec.contract_version,
            "input": unit.input,
            "idempotency_key": unit.idempotency_key,
            "attempt": unit.attempt,
            "redelivery": unit.redelivery,
        }
        if deadline is not None and timeout is not None:
            assignment["deadline_ms"] = deadline
            assignment["timeout_ms"] = timeout
        return assignment
