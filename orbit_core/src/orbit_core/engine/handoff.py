"""What a server that shares executions with other servers needs from the
engine (chapter 44's shared mode), as a few store-neutral steps; the server
(orbit_server/shared.py) decides when to take them and the store
(orbit_store/shared.py) makes them durable and fenced.

- Tasks: with `Engine(offer_tasks=True)` a scheduled worker task becomes a
  `TaskOffer` of its group's `CommitBatch` instead of an entry of the
  engine's own index, so polls never find work locally; with
  `local_first=True` as well it waits in the index first, and
  `publish_stale` turns the entries no poll took since its previous call
  into offers (out of the index in the same group), while an adopted
  execution's scheduled tasks are offered at once. Whoever claims an offer
  from the shared queue has the owner record the dispatch with the claimed
  token (`dispatch_offer`), which still checks that the unit waits for
  exactly that offer; `poll_withdrawable` lets a server take a waiting poll
  back before it claims a task for it elsewhere. Tokens the engine makes
  then name their execution (`<execution id>/<id>`).
- Sessions: a session registered through another server is made known here
  (`know_sessions`) so the attempts it takes can be held by it, the
  contacts it made elsewhere keep it alive (`touch_sessions`), and the
  attempts it should stop are handed out for it to hear of through any
  server (`cancels`).
- Ownership: `take_over` rebuilds executions from their histories as a
  restart does (attempts in flight get one session timeout for their
  reports, built-in attempts are uncertain, scheduled work is offered or
  routed again), and `release` drops executions another server now owns
  without telling their workers to stop (the new owner still wants them).
"""

from __future__ import annotations

from collections.abc import Mapping

from orbit_core import events as ev
from orbit_core.api import UnitStatus
from orbit_core.dispatch import Session
from orbit_core.engine.commands import Tx
from orbit_core.engine.executions import Executions
from orbit_core.engine.recovery import BUILTIN_RESTART_REASON
from orbit_core.engine.workers import Workers
from orbit_core.state import fold


def know_sessions(workers: Workers, sessions: list[Session]) -> int:
    """Adds the sessions not known yet; returns how many were added."""
    added = 0
    for session in sessions:
        if session.session_id not in workers.sessions:
            workers.sessions[session.session_id] = session
            added += 1
    return added


def touch_sessions(workers: Workers, seen: Mapping[str, int]) -> None:
    """Moves each known session's last contact forward to `seen`'s."""
    for session_id, at_ms in seen.items():
        session = workers.sessions.get(session_id)
        if session is not None and at_ms > session.last_seen_ms:
            session.last_seen_ms = at_ms
            session.lost = False


def cancels(workers: Workers, session_ids: list[str]) -> dict[str, list[str]]:
    """For each known session: the attempts it holds that are no longer
    wanted, each returned once (here or by the session's next heartbeat)."""
    out = {}
    for session_id in session_ids:
        session = workers.sessions.get(session_id)
        if session is not None and session.held:
            tokens = workers.cancels(session)
            if tokens:
                out[session_id] = tokens
    return out


def take_over(
    tx: Tx,
    executions: Executions,
    workers: Workers,
    histories: list[tuple[str, list[ev.Event]]],
) -> tuple[int, int]:
    """Adopts executions from their histories; returns how many were adopted
    and how many of their attempts were in flight at a worker."""
    adopted = []
    in_flight: list[str] = []
    builtin: list[str] = []
    for eid, events in histories:
        if not events or eid in executions.memory:
            continue
        state = fold(events, eid)
        if state.terminal:
            continue
        live = executions.adopt(state)
        if live is None:
            continue
        adopted.append(live)
        for event in events:
            if isinstance(event, ev.StepDispatched):
                workers.issued_to[event.token] = event.worker_id
        for unit in state.units.values():
            if unit.status != UnitStatus.DISPATCHED or unit.token is None:
                continue
            session = unit.worker_session or ""
            if session.startswith("builtin:"):
                builtin.append(unit.token)
            elif not session.startswith("child:"):
                in_flight.append(unit.token)
                holder = workers.sessions.get(session)
                if holder is not None:
                    workers.hold(holder, unit.token)
    workers.expect_reports(in_flight, tx.now + workers.session_timeout_ms)
    for token in builtin:
        workers.make_uncertain(tx, token, BUILTIN_RESTART_REASON)
    executions.route_unrouted(tx)
    for live in adopted:
        if not live.state.terminal:
            executions.decide(tx, live)
    return len(adopted), len(in_flight)


def release(executions: Executions, workers: Workers, execution_ids: list[str]) -> int:
    """Drops executions from memory; returns how many were held."""
    dropped = 0
    for eid in execution_ids:
        live = executions.memory.get(eid)
        if live is None:
            continue
        tokens = executions.forget(live)
        workers.drop(tokens)
        workers.forget(tokens)
        dropped += 1
    return dropped
