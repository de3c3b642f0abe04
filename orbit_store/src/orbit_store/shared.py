"""Shared mode's half of the store (chapter 44: every server active), on
PostgreSQL, whose row locks are the only coordination.

Tables, made by shared servers only (like `orbit_cluster`, under the schema
lock; their definitions and migrations are schema.py's):

- `orbit_nodes`: one row per server id, with its heartbeat written with the
  database's clock (`clock_timestamp()`), so liveness never depends on the
  servers' clocks, and the `instance` of the process holding the id (a
  second process with the same id is refused while the first heartbeats).
- `orbit_owners`: the owner and epoch of every running execution, and its
  root (an execution tree has one owner: a child gets its parent's root and
  owner). Rows are written in the transaction that creates the execution
  and deleted in the one that ends it.
- `orbit_tasks`: the shared queue of worker tasks (`TaskOffer`s of a
  group, written in its transaction: with a local-first engine, only the
  tasks no poll on their owner took, and those of executions it adopted).
  Any server claims the first row a session can take, in the board's order
  (below), with `FOR UPDATE SKIP LOCKED`; the row is deleted by the commit that records its dispatch, when
  its unit or execution ends, or when its owner finds the claimed offer no
  longer wanted (`drop_claim`); offered again under the same offer number,
  a claimed row nobody is dispatching any more is queued again
  (`_CLAIM_LEFT_BEHIND`). The store remembers which executions may
  have rows (`_queued`), so the commit of a task taken from the engine's
  own index writes nothing to the queue.
- `orbit_inbox`: commands for an execution's owner (a dispatch claimed
  elsewhere, results, signals, cancellations; and those a commit writes in
  its own transaction, `CommitBatch.messages`: a gated child's start, end
  and cancellation, orbit_core/engine/remote_children.py), applied by the owner in
  `seq` order. The commit of the events an entry causes marks it applied
  (its seq is the commands' receipt, `CommitBatch.receipts`), so an entry
  is applied once even if its owner dies right after; the reply is written
  back to the row for the server waiting.
- `orbit_waits`: the waits of servers for the end of an execution another
  server owns; the commit that ends one announces it (`NOTIFY orbit_done`)
  only if it is listed, so that no listener wakes for the ends nobody
  waits for elsewhere (nearly all).
- `orbit_step_slots`: the slots of step `concurrency` limits held for the
  whole group (orbit_core/engine/step_slots.py). A slot is taken in a
  short transaction of its own (`SharedTables.take_step_slot`), serialized
  per scope by a transaction-level advisory lock on the scope's hash, and
  deleted by the commit whose events make its unit leave the offer
  (`CommitBatch.freed_slots`: such a commit is a transaction, never the one
  statement).
- `orbit_step_waits`: the one line of units waiting for those slots, across
  the servers: a take refused writes the unit's row (its offer, step
  `priority` and since when it waits) in its transaction, and a take
  succeeds only while no other unit's row of the scope is ahead of it
  (higher priority, then earlier, then execution id and unit key in code
  point order: `_TAKE_STEP_SLOT`); a take deletes the taker's row. The
  commit whose events take a unit out of the line without a slot deletes
  its row (`CommitBatch.freed_waits`), and an owner's reconciliation
  deletes those of the executions it adopted.
- `orbit_board_clock` and `orbit_board_keys`: the virtual times of the
  board's order (below).
- `orbit_sessions`: worker sessions and their last contact, so a session
  works through every server; `orbit_cancels`: the attempts an owner wants
  a session to stop, returned by the session's next heartbeat anywhere.

`SharedStore` is the owner's store: every commit first locks the ownership
rows of the executions it changes (`FOR SHARE`) and aborts with `Fenced`
unless each still names this node at the epoch it holds. The row lock
orders a commit and a take-over (`UPDATE ... SET epoch = epoch + 1`): the
take-over waits for a commit in progress, and a commit after it sees the new
epoch, so a server that lost an execution (paused past the node timeout)
cannot write to it. The executions a refused commit named are reported
through `on_lost`, so the server drops them. Everything else of a commit is
written in the same transaction: the group's events and execution rows (as
a single server writes them, `PostgresStore.one_statement`), new ownership
rows, queued tasks, deleted rows of what ended, and `NOTIFY orbit_tasks` /
`orbit_done` (only when another server waits for one of the executions
that ended: `orbit_waits`). A commit with nothing for the queue or the inbox (nearly
every one: tasks wait in their owner's engine first) is all of that in ONE
autocommitted statement, whose first part is the fence (`orbit_fence`, a
function that locks the rows and raises when one moved on) and whose other
parts run only once it passed; a commit with queue rows or inbox receipts
is a transaction in pipeline mode, fence first.

The board's order is a step's `priority` (highest first), then weighted
fair queueing of its `fairness` keys by virtual time, then arrival
(`enqueued_ms, id`). Both numbers are settled in the commit that queues a
task (`_offer_statement`), from the `TaskOffer`'s priority, key and weight
(the engine's own order of the unit): a task of key k, weight w, gets
`vt = max(V, last[k]) + 1/w`, where V is the board's clock of its task name
(`orbit_board_clock`: the largest vt claimed, moved on by `claim_for`) and
last[k] the vt of k's previous task (`orbit_board_keys`, one row per
`<workflow>/<step>/<key>`); a task without fairness gets V, so those keep
their arrival order among themselves and the clock stays 0 while there is
no fairness at all. A key that arrives late starts from the clock, not
before everyone. Key rows the clock passed are swept by `vacuum`.
docs/design/cluster.md ("The board's order") says what it does not promise.

`SharedTables` holds the request-path statements (claims, inbox, sessions,
heartbeats, take-overs) on a few connections of its own, so that they never
wait for a group commit.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import orjson
import psycopg
from sqlalchemy.dialects import postgresql

from orbit_core import events as ev
from orbit_core.api import ExecutionStatus
from orbit_core.coordination import (  # the adapters below serve these ports
    REPLIED,
    Claim,
    InboxEntry,
    SessionRow,
)
from orbit_core.engine.flow_gates import GATE_PREFIX
from orbit_core.errors import StorageError
from orbit_core.ports import CommitBatch, ScheduleAdvance, StepSlot, StepWait, TaskOffer
from orbit_core.state import TERMINAL
from orbit_store import rates
from orbit_store.pg_arrays import Int8s, Texts
from orbit_store.postgres import (
    INSERT_EVENTS,
    INSERT_ROWS,
    UPDATE_ROWS,
    Fenced,
    PostgresStore,
    event_params,
    row_params,
    update_params,
)
from orbit_store.schema import FENCED_STATE, prepare_part

NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint"
# Events that end a unit: its queued offers are no longer wanted.
_UNIT_ENDS = (ev.StepCancelled, ev.StepSkipped, ev.StepFailed, ev.StepSucceeded)
_ENDED = frozenset(TERMINAL - {ExecutionStatus.CONTINUED_AS_NEW})
TAKEOVER_BATCH = 100
# A claimed row its owner offers again (the unit is still scheduled under
# the same offer number: the group that was to record the dispatch was
# undone) was left behind by a claim whose dispatch failed, and whose
# return to the queue failed too (the database was away), unless the claim
# was made through another server and its `dispatched` entry still waits
# in the owner's inbox. Left claimed, it would swallow the new offer and
# nobody would ever hand the task out; queued again, it is claimable. (A
# claim of the owner's own that is still being dispatched is harmless to
# put back: the dispatch's commit deletes the row, and a second claim of
# it is refused by the owner as no longer wanted.)
_CLAIM_LEFT_BEHIND = (
    "orbit_tasks.state = 'claimed' AND NOT EXISTS (SELECT 1 FROM orbit_inbox i "
    "WHERE i.execution_id = orbit_tasks.execution_id AND i.kind = 'dispatched' "
    "AND i.state = 'pending' AND i.payload LIKE '%%' || orbit_tasks.token || '%%')"
)
# pg_advisory_xact_lock's first key of the two-key form, which takes a
# step slot's scope (its hash) as the second: "orb" and an 8. The two-key
# form is a space of its own, apart from the one-key locks of the store.
STEP_SLOT_LOCK_KEY = 0x6F726208
CLAIM_PAUSE_S = 0.1
# How much older than a node's own first task another node's, equal to it in
# the board's order, must be to be claimed before it (SharedTables.claim_for):
# fair within this bound.
LOCAL_LEAD_MS = 1000
FORMER_KEPT = 10_000
# Longer than any wait (MAX_WAIT_MS is 300 s): older `orbit_waits` rows are
# left over by a server that stopped while it waited.
WAITS_KEPT_MS = 600_000
# A commit with no inbox receipts and nothing for the queue (nearly all of
# them) is one statement, autocommitted (`_fenced_group`): the fence first
# (`f`; every other part waits for it: a one-time filter, evaluated before
# any row is written), then the group's events and rows as a single server
# writes them, the ownership rows of new executions and the end of those
# that ended. A refusal raises inside it, so nothing of it is written.
_GATE = "(SELECT ok FROM f)"
# The end of executions (an array parameter) is announced only when a
# server waits for one of them (`SharedTables.watch`): every server's
# listener wakes for a notification, and nearly every end has no waiter
# elsewhere.
_ANNOUNCE = (
    "CASE WHEN EXISTS (SELECT 1 FROM orbit_waits WHERE execution_id = ANY(%b::text[])) "
    "THEN pg_notify('orbit_done', '') END"
)
_FENCE_PART = "f AS (SELECT orbit_fence(%s, %b::text[], %b::bigint[]) AS ok)"
_NEW_OWNERS_PART = (
    "o AS (INSERT INTO orbit_owners (execution_id, root_id, node_id, epoch, since_ms) "
    f"SELECT e, r, %s, 1, {NOW_MS} FROM unnest(%b::text[], %b::text[]) AS v(e, r) "
    "WHERE {gate})"
)


@functools.cache
def _fenced_group(changed: bool, new: bool, owners: bool, gone: bool, ended: bool) -> str:
    """The statement of a commit with only the parts it needs (each one
    costs PostgreSQL planning and running even with no rows): the fence
    and the update of execution rows when it changes executions this node
    holds (`changed`), new execution rows (`new`) and ownership rows
    (`owners`), the ownership rows of held executions that ended (`gone`),
    and the announcement of those that ended (`ended`, `_ANNOUNCE`).
    Parameters in the order of the parts."""
    gate = _GATE if changed else "true"
    parts = [_FENCE_PART] if changed else []
    parts.append(f"e AS ({INSERT_EVENTS} WHERE {gate})")
    if new:
        parts.append(f"n AS ({INSERT_ROWS} WHERE {gate})")
    if changed:
        parts.append(f"u AS ({UPDATE_ROWS} AND {gate})")
    if owners:
        parts.append(_NEW_OWNERS_PART.format(gate=gate))
    if gone:
        parts.append(
            f"d AS (DELETE FROM orbit_owners WHERE execution_id = ANY(%b::text[]) AND {gate})"
        )
    notify = _ANNOUNCE if ended else "1"
    return "WITH " + ", ".join(parts) + f" SELECT {notify}" + (" FROM f" if changed else "")


def create_tables(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        prepare_part(conn, "shared")


def fenced_message(execution_id: str, found: tuple[str, int] | None, held: int) -> str:
    if found is None:
        return f"fenced: execution `{execution_id}` has no owner now; this node held epoch {held}"
    return (
        f"fenced: execution `{execution_id}` is owned by node `{found[0]}` at epoch "
        f"{found[1]}; this node held epoch {held}"
    )


@attrs.frozen(slots=True)
class NodeRow:
    node_id: str
    addr: str | None
    live: bool
    heartbeat_age_ms: int
    owned_executions: int


class SharedStore(PostgresStore):
    """The store of one server of a shared cluster (module docstring)."""

    def __init__(self, url: str, *, node_id: str, ca_cert: str | None = None) -> None:
        super().__init__(url, ca_cert=ca_cert)
        self.node_id = node_id
        self._lock = threading.Lock()
        # What this node owns: execution id -> (root id, epoch held).
        self._owned: dict[str, tuple[str, int]] = {}
        # The executions whose tasks may have rows in the queue, with the
        # units offered (None: any unit, for what was owned elsewhere or by
        # a previous process). A task taken from the engine's own index has
        # none, so its commit need not look (SharedStore._queue).
        self._queued: dict[str, set[str] | None] = {}
        # The epochs of executions this node held last (the newest few).
        self._former: dict[str, int] = {}
        self._batch = threading.local()
        self.on_lost: Callable[[list[str]], None] | None = None
        try:
            conn = self.session(f"orbit-shared:{node_id}")
            try:
                create_tables(conn)
            except psycopg.Error as exc:
                raise StorageError(self.describe_error(exc)) from exc
            finally:
                conn.close()
        except BaseException:
            self.close()  # the base store's engine, opened above
            raise

    # ---- ownership held in memory

    def owned(self) -> dict[str, tuple[str, int]]:
        with self._lock:
            return dict(self._owned)

    def owns(self, execution_id: str) -> bool:
        with self._lock:
            return execution_id in self._owned

    def adopt(self, rows: Iterable[tuple[str, str, int]], *, queued: bool = True) -> None:
        """Records executions this node now owns: (id, root, epoch);
        `queued`: the queue may hold rows of theirs written elsewhere (taken
        over, or resumed after a restart)."""
        with self._lock:
            for eid, root, epoch in rows:
                self._owned[eid] = (root, epoch)
                if queued:
                    self._queued[eid] = None

    def disown(self, execution_ids: Iterable[str]) -> None:
        with self._lock:
            for eid in execution_ids:
                held = self._owned.pop(eid, None)
                self._queued.pop(eid, None)
                if held is not None:
                    # For the refusal of a write still under way for it.
                    self._former[eid] = held[1]
            while len(self._former) > FORMER_KEPT:
                del self._former[next(iter(self._former))]

    # ---- schedules: claims name this node, and only its own are dropped

    def claim_schedules(
        self, claims: list[tuple[str, int]], owner: str, until_ms: int, now_ms: int
    ) -> list[str]:
        claimed = super().claim_schedules(claims, self.node_id, until_ms, now_ms)
        if claims and not claimed:
            # Another server is firing these: the scheduler reads them again
            # and would ask at once while that server has not advanced them.
            time.sleep(CLAIM_PAUSE_S)
        return claimed

    def schedules_mark(self) -> tuple[int, ...]:
        """The schedules' state in a few numbers (count, latest change,
        fires): a server reads them all again when these change."""

        def read(conn: Any) -> tuple[int, ...]:
            row = conn.exec_driver_sql(
                "SELECT count(*), coalesce(max(updated_at_ms), 0), "
                "coalesce(sum(fired_count + skipped_count), 0) FROM orbit_schedules"
            ).first()
            return tuple(int(x) for x in row) if row is not None else ()

        return self._read(read)

    def advance_schedules(self, advances: list[ScheduleAdvance], owner: str) -> list[str]:
        return super().advance_schedules(advances, self.node_id)

    def release_schedule_claims(self) -> None:
        """A server starting drops the claims of its previous process only;
        another server's claim expires by itself (chapter 41)."""
        node = self.node_id

        def release(cursor: Any) -> None:
            cursor.execute(
                "UPDATE orbit_schedules SET claimed_by = NULL, claimed_until_ms = NULL "
                "WHERE claimed_by = %s",
                (node,),
            )

        super()._write(release, None)

    # ---- the store port

    def load_active(self) -> list[tuple[str, list[ev.Event]]]:
        """Only what this node owned before it restarted, under a new epoch
        (which fences the previous process of the same id)."""

        def resume(cursor: Any) -> None:
            cursor.execute(
                "UPDATE orbit_owners SET epoch = epoch + 1, since_ms = "
                + NOW_MS
                + " WHERE node_id = %s RETURNING execution_id, root_id, epoch",
                (self.node_id,),
            )
            self.adopt((r[0], r[1], int(r[2])) for r in cursor.fetchall())

        super()._write(resume, None)
        return self.histories(list(self.owned()))

    def histories(self, execution_ids: list[str]) -> list[tuple[str, list[ev.Event]]]:
        """The current run's history of each execution that is still running."""
        out = []
        for eid in execution_ids:
            row = self.execution_row(eid)
            if row is None or row.status in _ENDED:
                continue
            events = self.history(eid)
            if events:
                out.append((eid, events))
        return out

    def commit(self, batch: CommitBatch) -> None:
        self._batch.current = batch
        self._batch.fenced = None  # (set by `one_statement` for this batch)
        try:
            super().commit(batch)
        finally:
            self._batch.current = None

    def one_statement(
        self,
        events: list[tuple[Any, ...]],
        new_rows: list[tuple[Any, ...]],
        updates: list[tuple[Any, ...]],
        search_rows: list[tuple[Any, ...]],
    ) -> Callable[[Any], None] | None:
        """The usual group with its fence and ownership rows, as one
        statement (`_fenced_group`), unless it has inbox receipts, anything
        for the queue or search rows: those go as one transaction (`_write`)."""
        batch: CommitBatch | None = getattr(self._batch, "current", None)
        self._batch.fenced = None
        if (
            batch is None
            or batch.receipts
            or batch.offers
            or batch.freed_slots
            or batch.freed_waits
            or batch.messages
        ):
            return super().one_statement(events, new_rows, updates, search_rows)
        if _revived(batch, self.owned()):
            return super().one_statement(events, new_rows, updates, search_rows)
        if search_rows:
            return None
        unqueued, units, _, paused = _queue_changes(batch, self._queued)
        if unqueued or units or paused:
            return super().one_statement(events, new_rows, updates, search_rows)
        owned = self.owned()
        changed = [c.execution_id for c in batch.executions if not c.new] + _gates(batch)
        new_owned = _new_owners(batch, owned)
        ended = {c.execution_id for c in batch.executions if c.row.status in _ENDED}
        # The parts of one statement do not see each other's rows: one that
        # starts and ends here gets no ownership row at all.
        rows = [o for o in new_owned if o[0] not in ended]
        gone = [eid for eid in changed if eid in ended]
        params: list[Any] = []
        if changed:
            epochs = Int8s(owned[eid][1] if eid in owned else 0 for eid in changed)
            params += [self.node_id, Texts(changed), epochs]
        params += event_params(events)
        if new_rows:
            params += row_params(new_rows)
        if changed:
            params += update_params(updates)
        if rows:
            params += [self.node_id, Texts(o[0] for o in rows), Texts(o[1] for o in rows)]
        if gone:
            params.append(Texts(gone))
        if ended:
            params.append(Texts(ended))
        statement = _fenced_group(
            bool(changed), bool(new_rows), bool(rows), bool(gone), bool(ended)
        )

        def run(cursor: Any) -> None:
            try:
                cursor.execute(statement, params)
            except psycopg.Error as exc:
                if exc.sqlstate != FENCED_STATE:
                    raise
                # Nothing was written; what the rows say now names the lost.
                self._fence(cursor, changed, owned, lock=False)
                raise  # (the fence read found nothing lost: never the case)

        self._batch.fenced = new_owned
        return run

    def _write(
        self,
        statements: Any,
        marker: Any,
        *,
        alone: bool = False,
        link: Any = None,
        durable: bool = True,
    ) -> None:
        batch: CommitBatch | None = getattr(self._batch, "current", None)
        if batch is None:
            super()._write(statements, marker, alone=alone, link=link, durable=durable)
            return
        fenced: list[tuple[str, str, int]] | None = getattr(self._batch, "fenced", None)
        self._batch.fenced = None
        if alone and fenced is not None:
            # The fenced one statement of `one_statement`, autocommitted.
            super()._write(statements, marker, alone=True)
            self.adopt(fenced, queued=False)
        else:
            # The group's statement is not autocommitted here: the fence,
            # owners, queue and receipts join it in one transaction.
            written: list[tuple[list[tuple[str, str, int]], Callable[[], None]]] = []

            def shared(cursor: Any) -> None:
                done = self._shared_writes(cursor, batch)
                statements(cursor)
                written.append(done)

            try:
                super()._write(shared, marker)
            except BaseException:
                # The database may have taken it all the same (the answer to
                # COMMIT was lost): its offers may be queued. The ownership
                # of what it created or ended is set right by the server's
                # next round, from the database's rows.
                with self._lock:
                    for offer in batch.offers:
                        if offer.execution_id in self._owned:
                            self._queued[offer.execution_id] = None
                raise
            if written:
                new_owned, record = written[-1]
                self.adopt(new_owned, queued=False)
                record()
        self.disown(c.execution_id for c in batch.executions if c.row.status in _ENDED)

    def _shared_writes(
        self, cursor: Any, batch: CommitBatch
    ) -> tuple[list[tuple[str, str, int]], Callable[[], None]]:
        owned = self.owned()
        new = {c.execution_id for c in batch.executions if c.new}
        revived = set(_revived(batch, owned))
        changed = [
            c.execution_id for c in batch.executions if not c.new and c.execution_id not in revived
        ]
        # The executions it offers tasks of too: a group that only publishes
        # tasks of one this node lost must not queue them.
        changed += sorted({o.execution_id for o in batch.offers} - new - set(changed))
        # The flow gates its new executions join: held here, at its epoch.
        changed += _gates(batch)
        if changed:
            self._fence(cursor, changed, owned, lock=True)
        new_owned = self._own(cursor, batch, owned)
        record = self._queue(cursor, batch)
        if batch.freed_slots:
            _delete_slots(cursor, batch.freed_slots)
        if batch.freed_waits:
            _delete_waits(cursor, batch.freed_waits)
        if batch.receipts:
            # Inbox entries applied by this commit: never applied again.
            # Those whose sender waits keep their row for the reply.
            seqs = [int(r) for r in batch.receipts]
            cursor.execute(
                "DELETE FROM orbit_inbox WHERE seq = ANY(%s) AND state = 'pending' "
                "AND kind <> ALL(%s)",
                (seqs, sorted(REPLIED)),
            )
            cursor.execute(
                "UPDATE orbit_inbox SET state = 'applied' WHERE seq = ANY(%s) "
                "AND state = 'pending' AND kind = ANY(%s)",
                (seqs, sorted(REPLIED)),
            )
        if batch.messages:
            _send(cursor, self.node_id, batch)
        return new_owned, record

    def _fence(
        self, cursor: Any, changed: list[str], owned: dict[str, tuple[str, int]], *, lock: bool
    ) -> None:
        """Refuses the commit unless this node still owns, at the epoch it
        holds, every execution the batch changes (`changed`); `lock` holds
        their ownership rows (FOR SHARE) until the commit's transaction ends."""
        cursor.execute(
            "SELECT execution_id, node_id, epoch FROM orbit_owners WHERE execution_id = ANY(%s)"
            + (" FOR SHARE" if lock else ""),
            (changed,),
        )
        found = {r[0]: (r[1], int(r[2])) for r in cursor.fetchall()}
        lost = []
        for eid in changed:
            held = owned.get(eid)
            now = found.get(eid)
            if held is None or now != (self.node_id, held[1]):
                lost.append((eid, now, held[1] if held else self._former.get(eid, 0)))
        if lost:
            ids = [eid for eid, _, _ in lost]
            self.disown(ids)
            if self.on_lost is not None:
                self.on_lost(ids)
            eid, now, held_epoch = lost[0]
            raise Fenced(fenced_message(eid, now, held_epoch))

    def _own(
        self, cursor: Any, batch: CommitBatch, owned: dict[str, tuple[str, int]]
    ) -> list[tuple[str, str, int]]:
        """Ownership rows of new executions (a child joins its parent's
        tree) and the end of those that ended."""
        revived = self._revive(cursor, _revived(batch, owned), owned)
        new_owned = _new_owners(batch, owned)
        if new_owned:
            # One statement, whatever the number (all at epoch 1).
            cursor.execute(
                "INSERT INTO orbit_owners (execution_id, root_id, node_id, epoch, since_ms) "
                "SELECT e, r, %s, 1, " + NOW_MS + " FROM unnest(%b::text[], %b::text[]) AS v(e, r)",
                (self.node_id, [o[0] for o in new_owned], [o[1] for o in new_owned]),
            )
        ended = [c.execution_id for c in batch.executions if c.row.status in _ENDED]
        if ended:
            cursor.execute(
                "DELETE FROM orbit_owners WHERE execution_id = ANY(%b::text[])", (ended,)
            )
            cursor.execute("SELECT " + _ANNOUNCE, (ended,))
        return revived + new_owned

    def _revive(
        self, cursor: Any, revived: list[str], owned: dict[str, tuple[str, int]]
    ) -> list[tuple[str, str, int]]:
        """Ownership rows of executions a restart brings back from their end
        (`_revived`), taken by this node at epoch 1 unless another server
        holds one already (it restarted it first, or it never ended): then
        the commit is refused as fenced. Adds them to `owned`; returns them
        as (id, root, epoch), for this node to adopt once committed."""
        if not revived:
            return []
        cursor.execute(
            "INSERT INTO orbit_owners (execution_id, root_id, node_id, epoch, since_ms) "
            "SELECT e, e, %s, 1, " + NOW_MS + " FROM unnest(%b::text[]) AS v(e) "
            "ON CONFLICT (execution_id) DO NOTHING RETURNING execution_id",
            (self.node_id, revived),
        )
        taken = {r[0] for r in cursor.fetchall()}
        for eid in revived:
            if eid not in taken:
                cursor.execute(
                    "SELECT node_id, epoch FROM orbit_owners WHERE execution_id = %s", (eid,)
                )
                row = cursor.fetchone()
                found = (row[0], int(row[1])) if row is not None else None
                raise Fenced(fenced_message(eid, found, self._former.get(eid, 0)))
            owned[eid] = (eid, 1)
        return [(eid, eid, 1) for eid in revived]

    def _queue(self, cursor: Any, batch: CommitBatch) -> Callable[[], None]:
        """The shared queue: rows of what ended or was dispatched go, offers
        come. Only executions that may have rows (`_queued`) are looked at,
        so a commit of tasks taken from the engine's own index writes
        nothing here. Returns what to record once the commit is durable."""
        queued = self._queued
        gone, units, later, paused = _queue_changes(batch, queued)
        done = [(u[0], u[1]) for u in units]
        ended = set(gone)
        # An offer made before a later command of its group dispatched or
        # ended its unit (or its execution) is not wanted.
        # One row per offer: a group may carry the same offer twice (made
        # again after a failed group), and one INSERT ... ON CONFLICT DO
        # UPDATE may not touch a row twice.
        offers: list[TaskOffer] = []
        seen: set[tuple[str, str, int]] = set()
        for o in batch.offers:
            key = (o.execution_id, o.unit_key, o.offer_seq)
            if (
                key not in seen
                and o.execution_id not in ended
                and o.execution_id not in paused
                and later.get((o.execution_id, o.unit_key), 0) < o.offer_seq
            ):
                seen.add(key)
                offers.append(o)
        # One statement each, whatever the size of the group.
        if gone:
            cursor.execute("DELETE FROM orbit_tasks WHERE execution_id = ANY(%s)", (gone,))
        if paused:
            # A paused execution's tasks wait for its resume, which offers
            # them again; one claimed already is its claimer's to hand in.
            cursor.execute(
                "DELETE FROM orbit_tasks WHERE execution_id = ANY(%s) AND state = 'queued'",
                (sorted(paused),),
            )
        if units:
            # A dispatched unit's claimed row (its token) and any queued one
            # (an offer made again after a failed group); an ended unit's
            # queued rows (a claimed one is dropped by its claimer).
            cursor.execute(
                "DELETE FROM orbit_tasks t USING unnest(%b::text[], %b::text[], %b::text[]) "
                "AS g(e, k, tok) WHERE t.execution_id = g.e AND t.unit_key = g.k "
                "AND (t.state = 'queued' OR t.token = g.tok)",
                ([u[0] for u in units], [u[1] for u in units], [u[2] for u in units]),
            )
        if offers:
            rows = [_offer_row(o) for o in offers]
            fair = any(o.fair_key is not None for o in offers)
            cursor.execute(
                _offer_statement(fair),
                (*([r[i] for r in rows] for i in range(len(rows[0]))), self.node_id),
            )
            cursor.execute("SELECT pg_notify('orbit_tasks', '')")
        kept = [(o.execution_id, o.unit_key) for o in offers]

        def record() -> None:
            with self._lock:
                for eid in gone:
                    queued.pop(eid, None)
                for eid, key in done:
                    keys = queued.get(eid)
                    if keys:
                        keys.discard(key)
                        if not keys:
                            del queued[eid]
                for eid, key in kept:
                    keys = queued.setdefault(eid, set())
                    if keys is not None:
                        keys.add(key)

        return record


# The board's order (module docstring): a claim reads the queue indexes in it.
_BOARD_ORDER = "priority DESC, vt, enqueued_ms, id"
_CLAIMED = "id, execution_id, unit_key, offer_seq, timeout_ms, assignment, enqueued_ms, priority, vt, task_name"
# Another node's task before this node's first (`claim_for`): parameters
# the first's priority (twice), virtual time (twice) and enqueued_ms less
# LOCAL_LEAD_MS.
_BEFORE_FIRST = (
    "AND (priority > %s OR (priority = %s AND (vt < %s OR (vt = %s AND enqueued_ms < %s)))) "
)


@functools.cache
def _claim_select(language: bool, *, mine: bool, before: bool) -> str:
    """A claim's select of queued tasks, this node's (`mine`) or the
    others' (`before`: only those before this node's first,
    `_BEFORE_FIRST`), of a runtime (`language`) or any, in the board's
    order. Each contract's tasks are read from its index in order, up to
    the limit, locked as they are read; the few rows found are then
    ordered together. Parameters: the contracts' names and versions, the
    runtime (with `language`), this node's id, the first's place (with
    `before`), the limit twice."""
    return (
        f"SELECT {_CLAIMED} FROM unnest(%b::text[], %b::text[]) AS c(n, v) CROSS JOIN LATERAL "
        f"(SELECT {_CLAIMED} FROM orbit_tasks WHERE state = 'queued' AND task_name = c.n "
        "AND contract_version = c.v "
        + ("AND (language IS NULL OR language = %s) " if language else "")
        + ("AND node_id = %s " if mine else "AND node_id IS DISTINCT FROM %s ")
        + (_BEFORE_FIRST if before else "")
        + f"ORDER BY {_BOARD_ORDER} LIMIT %s FOR UPDATE SKIP LOCKED) t "
        f"ORDER BY {_BOARD_ORDER} LIMIT %s"
    )


def _board_place(row: tuple[Any, ...]) -> tuple[int, float, int, int]:
    """A row of `claim_for`'s select in `_BOARD_ORDER`."""
    return (-int(row[7]), float(row[8]), int(row[6]), int(row[0]))


def _advance_clock(conn: psycopg.Connection[Any], rows: list[tuple[Any, ...]]) -> None:
    """Moves the board's clock of each task name claimed to the latest
    virtual time claimed of it. Tasks without a fairness key carry the
    clock's time, which stays 0 while no step declares fairness: a claim
    of only such tasks writes nothing, so those claims never wait for each
    other on the clock's row."""
    latest: dict[str, float] = {}
    for row in rows:
        vt = float(row[8])
        if vt > latest.get(row[9], 0.0):
            latest[row[9]] = vt
    if not latest:
        return
    names = sorted(latest)
    conn.execute(
        "INSERT INTO orbit_board_clock AS c (task_name, vt) "
        "SELECT * FROM unnest(%b::text[], %b::float8[]) ON CONFLICT (task_name) "
        "DO UPDATE SET vt = excluded.vt WHERE c.vt < excluded.vt",
        (names, [latest[n] for n in names]),
    )


def _revived(batch: CommitBatch, owned: dict[str, tuple[str, int]]) -> list[str]:
    """Executions the batch begins a new run of (`archive_run`) that this
    node does not hold: a restart of one that had ended (its ownership row
    went with its end; docs/restart-and-fork.md). A continue-as-new is
    always of one held here."""
    return [
        c.execution_id
        for c in batch.executions
        if not c.new and c.archive_run is not None and c.execution_id not in owned
    ]


def _gates(batch: CommitBatch) -> list[str]:
    """The flow gates the batch's new executions join (their trees'
    roots): the commit is fenced on them as on the executions it changes,
    so only the gate's holder adds to it."""
    return sorted({c.root for c in batch.executions if c.new and c.root is not None})


def _send(cursor: Any, node_id: str, batch: CommitBatch) -> None:
    """The batch's inbox entries for other owners (a gated child's start,
    end or cancellation: orbit_core/engine/remote_children.py), in its
    transaction, and their notification (sent when it commits)."""
    messages = batch.messages
    cursor.execute(
        "INSERT INTO orbit_inbox (execution_id, kind, payload, sender, state, created_ms) "
        "SELECT e, k, p, %s, 'pending', " + NOW_MS + " "
        "FROM unnest(%b::text[], %b::text[], %b::text[]) AS v(e, k, p)",
        (
            node_id,
            [m.target for m in messages],
            [m.kind for m in messages],
            [orjson.dumps(m.payload).decode() for m in messages],
        ),
    )
    cursor.execute(
        "SELECT pg_notify('orbit_inbox', e) FROM unnest(%b::text[]) AS e",
        (sorted({m.target for m in messages}),),
    )


def _new_owners(
    batch: CommitBatch, owned: dict[str, tuple[str, int]]
) -> list[tuple[str, str, int]]:
    """(execution id, root, epoch 1) of the batch's new executions: a child
    joins its parent's tree, a gated child its flow gate's (`root`). Adds
    them to `owned`."""
    new_owned = []
    for change in batch.executions:
        if not change.new:
            continue
        root = change.root or change.execution_id
        created = change.events[0] if change.events else None
        if (
            isinstance(created, ev.WorkflowCreated)
            and created.parent is not None
            and change.root is None
        ):
            # (A gated child joins its flow gate's tree instead: `root`.)
            parent = created.parent["execution_id"]
            root = owned.get(parent, (parent, 0))[0]
        owned[change.execution_id] = (root, 1)
        new_owned.append((change.execution_id, root, 1))
    return new_owned


def _queue_changes(
    batch: CommitBatch, queued: dict[str, set[str] | None]
) -> tuple[list[str], list[tuple[str, str, str | None]], dict[tuple[str, str], int], set[str]]:
    """Of the executions that may have rows in the queue or are offered
    now: those that ended (or started a new run), the units dispatched
    (with their token) or ended (None), the seq of the last event that
    dispatched or ended each unit, and those the batch leaves paused."""
    offered = {o.execution_id for o in batch.offers}
    gone: list[str] = []
    units: list[tuple[str, str, str | None]] = []
    later: dict[tuple[str, str], int] = {}
    paused: set[str] = set()
    for change in batch.executions:
        eid = change.execution_id
        if eid not in queued and eid not in offered:
            continue
        if change.row.status in _ENDED or change.archive_run is not None:
            gone.append(eid)
            continue
        for event in change.events:
            if isinstance(event, ev.WorkflowPaused):
                paused.add(eid)
                continue
            if isinstance(event, ev.WorkflowResumed):
                paused.discard(eid)
                continue
            if isinstance(event, ev.StepDispatched):
                units.append((eid, event.step, event.token))
            elif isinstance(event, _UNIT_ENDS):
                units.append((eid, event.step, None))
            else:
                continue
            later[(eid, event.step)] = event.seq
    return gone, units, later, paused


def _offer_row(offer: TaskOffer) -> tuple[Any, ...]:
    return (
        offer.execution_id,
        offer.unit_key,
        offer.offer_seq,
        offer.task,
        offer.contract_version,
        offer.runtime,
        offer.timeout_ms,
        orjson.dumps(offer.assignment).decode(),
        offer.priority,
        offer.fair_key,
        1.0 / max(1, offer.weight),
    )


# The offers of a group (`_offer_row`'s columns, in the order they came),
# and for each task name the board's clock: the virtual time of the task
# claimed last (0 before any).
_OFFERS = (
    "x AS (SELECT * FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::text[], %b::text[], "
    "%b::text[], %b::bigint[], %b::text[], %b::bigint[], %b::text[], %b::float8[]) "
    "WITH ORDINALITY AS x(e, k, o, n, v, l, t, a, p, f, s, i)), "
    "c AS (SELECT task_name AS n, vt FROM orbit_board_clock "
    "WHERE task_name IN (SELECT n FROM x))"
)
# Each fairness key of the group moves its time on by 1/weight per task,
# from the later of the clock and its own previous time; one upsert per
# key (in key order: two commits lock key rows in the same order), which
# returns the key's time after its last task here. ("Now" is read again in
# the update: the same snapshot, so the same value as in `c`.)
_KEYED = (
    "keyed AS (INSERT INTO orbit_board_keys AS b (fair_key, task_name, vt) "
    "SELECT x.f, min(x.n), coalesce(max(c.vt), 0) + sum(x.s) FROM x LEFT JOIN c ON c.n = x.n "
    "WHERE x.f IS NOT NULL GROUP BY x.f ORDER BY x.f "
    "ON CONFLICT (fair_key) DO UPDATE SET task_name = excluded.task_name, "
    "vt = excluded.vt + greatest(b.vt - coalesce((SELECT k.vt FROM orbit_board_clock k "
    "WHERE k.task_name = excluded.task_name), 0), 0) RETURNING fair_key, vt)"
)


@functools.cache
def _offer_statement(fair: bool) -> str:
    """The insert of a group's offers into the board with their place in
    its order (module docstring, "The board's order"): a task without a
    fairness key gets the clock's time, so those keep their arrival order
    among themselves; a task of key k the time of k's upsert less the
    1/weight of k's later tasks in the group. `fair`: some offer has a key
    (the usual group has none, and is spared the key table). Parameters:
    the columns of `_offer_row`, then this node's id."""
    if fair:
        vt = (
            "CASE WHEN x.f IS NULL THEN coalesce(c.vt, 0) ELSE keyed.vt - coalesce(sum(x.s) "
            "OVER (PARTITION BY x.f ORDER BY x.i ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED "
            "FOLLOWING), 0) END"
        )
        ctes = f"WITH {_OFFERS}, {_KEYED} "
        joins = "LEFT JOIN keyed ON keyed.fair_key = x.f "
    else:
        vt, ctes, joins = "coalesce(c.vt, 0)", f"WITH {_OFFERS} ", ""
    return (
        ctes + "INSERT INTO orbit_tasks (execution_id, unit_key, offer_seq, task_name, "
        "contract_version, language, timeout_ms, assignment, node_id, state, priority, vt, "
        f"enqueued_ms) SELECT x.e, x.k, x.o, x.n, x.v, x.l, x.t, x.a, %s, 'queued', x.p, {vt}, "
        + NOW_MS
        + " FROM x LEFT JOIN c ON c.n = x.n "
        + joins
        + "ORDER BY x.i ON CONFLICT (execution_id, unit_key, offer_seq) DO UPDATE SET "
        "state = 'queued', token = NULL, claimed_by = NULL, session_id = NULL, "
        "node_id = excluded.node_id WHERE " + _CLAIM_LEFT_BEHIND
    )


class SharedTables:
    """The request-path statements of one node (module docstring), each its
    own transaction on one of a few autocommit connections."""

    def __init__(
        self,
        store: PostgresStore,
        node_id: str,
        *,
        connections: int = 4,
    ) -> None:
        self._store = store
        self.node_id = node_id
        self._idle: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue()
        self._limit = threading.BoundedSemaphore(connections)
        # Whether `orbit_flow_rates` (a part made on first use) is known here.
        self._rates_ready = False

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        self._limit.acquire()
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._store.session(f"orbit-shared:{self.node_id}")
                # Generic plans: these statements name rows by key or read a
                # partial index in order, and planning each one again (the
                # store's sessions' setting) cost as much as running it.
                try:
                    conn.execute("SET plan_cache_mode = auto")
                except psycopg.Error as exc:
                    conn.close()
                    raise StorageError(self._store.describe_error(exc)) from exc
            try:
                yield conn
            except psycopg.Error as exc:
                with contextlib.suppress(Exception):
                    conn.close()
                raise StorageError(self._store.describe_error(exc)) from exc
            if not conn.closed and not conn.broken:
                self._idle.put(conn)
        finally:
            self._limit.release()

    def close(self) -> None:
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return
            with contextlib.suppress(Exception):
                conn.close()

    # ---- nodes

    def join(self, addr: str | None, instance: str, timeout_ms: int) -> bool:
        """Takes the node id for this process; False while another process
        holding it heartbeats (less than `timeout_ms` ago)."""
        with self._conn() as conn:
            row = conn.execute(
                "INSERT INTO orbit_nodes (node_id, addr, instance, heartbeat_ms, started_ms) "
                "VALUES (%s, %s, %s, " + NOW_MS + ", " + NOW_MS + ") "
                "ON CONFLICT (node_id) DO UPDATE SET addr = excluded.addr, "
                "instance = excluded.instance, heartbeat_ms = excluded.heartbeat_ms, "
                "started_ms = excluded.started_ms "
                "WHERE orbit_nodes.instance = excluded.instance "
                "OR orbit_nodes.heartbeat_ms < excluded.heartbeat_ms - %s RETURNING node_id",
                (self.node_id, addr, instance, timeout_ms),
            ).fetchone()
            return row is not None

    def heartbeat(self, instance: str) -> bool:
        """False when another process took this node id."""
        with self._conn() as conn:
            cursor = conn.execute(
                "UPDATE orbit_nodes SET heartbeat_ms = " + NOW_MS + " "
                "WHERE node_id = %s AND instance = %s",
                (self.node_id, instance),
            )
            return cursor.rowcount == 1

    def leave(self, instance: str) -> None:
        """A graceful exit: the others take this node's executions at once."""
        with self._conn() as conn:
            conn.execute(
                "UPDATE orbit_nodes SET heartbeat_ms = 0 WHERE node_id = %s AND instance = %s",
                (self.node_id, instance),
            )

    def nodes(self, timeout_ms: int) -> list[NodeRow]:
        """Every node that is live or still owns executions."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT n.node_id, n.addr, " + NOW_MS + " - n.heartbeat_ms, "
                # (Flow gates are not executions: orbit_core/engine/flow_gates.py.)
                "(SELECT count(*) FROM orbit_owners o WHERE o.node_id = n.node_id "
                f"AND o.execution_id NOT LIKE '{GATE_PREFIX}%') "
                "FROM orbit_nodes n ORDER BY n.node_id"
            ).fetchall()
        out = []
        for node_id, addr, age, owned in rows:
            live = int(age) <= timeout_ms
            if live or owned:
                out.append(NodeRow(node_id, addr, live, max(0, int(age)), int(owned)))
        return out

    def orphaned_roots(self, timeout_ms: int) -> list[tuple[str, str]]:
        """(root id, owner) of the trees owned by nodes that are not live."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT DISTINCT o.root_id, o.node_id FROM orbit_owners o "
                "LEFT JOIN orbit_nodes n ON n.node_id = o.node_id "
                "WHERE n.node_id IS NULL OR n.heartbeat_ms < " + NOW_MS + " - %s "
                "ORDER BY o.root_id",
                (timeout_ms,),
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def take_over(self, roots: list[str], dead: str) -> list[tuple[str, str, int]]:
        """Moves the trees to this node with a new epoch, if `dead` still owns
        them (so only one server wins); claims the dead node made for its
        own executions without recording them are queued again. Returns
        (execution id, root, epoch) of what moved."""
        with self._conn() as conn, conn.transaction():
            # The queue's rows first, in the order a claim locks them (its
            # task, then its owner's row): the other order deadlocked.
            conn.execute(
                "SELECT t.id FROM orbit_tasks t JOIN orbit_owners o USING (execution_id) "
                "WHERE o.root_id = ANY(%s) AND o.node_id = %s ORDER BY t.id FOR UPDATE OF t",
                (roots, dead),
            )
            rows = conn.execute(
                "UPDATE orbit_owners SET node_id = %s, epoch = epoch + 1, since_ms = "
                + NOW_MS
                + " WHERE root_id = ANY(%s) AND node_id = %s "
                "RETURNING execution_id, root_id, epoch",
                (self.node_id, roots, dead),
            ).fetchall()
            moved = [(r[0], r[1], int(r[2])) for r in rows]
            if moved:
                conn.execute(
                    "UPDATE orbit_tasks SET node_id = %s WHERE execution_id = ANY(%s)",
                    (self.node_id, [m[0] for m in moved]),
                )
                conn.execute(
                    "UPDATE orbit_tasks t SET state = 'queued', token = NULL, claimed_by = NULL, "
                    "session_id = NULL WHERE t.execution_id = ANY(%s) AND t.state = 'claimed' "
                    "AND t.claimed_by = %s AND NOT EXISTS (SELECT 1 FROM orbit_inbox i "
                    "WHERE i.execution_id = t.execution_id AND i.kind = 'dispatched' "
                    "AND i.state = 'pending' AND i.payload LIKE '%%' || t.token || '%%')",
                    ([m[0] for m in moved], dead),
                )
                conn.execute("SELECT pg_notify('orbit_tasks', '')")
            return moved

    def owned_rows(self) -> dict[str, int]:
        """The executions the database says this node owns, with their epochs."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT execution_id, epoch FROM orbit_owners WHERE node_id = %s",
                (self.node_id,),
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def owners(self, execution_ids: list[str]) -> dict[str, tuple[str, int, str]]:
        """(node, epoch, root) of each of these executions that has an owner."""
        if not execution_ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT execution_id, node_id, epoch, root_id FROM orbit_owners "
                "WHERE execution_id = ANY(%s)",
                (execution_ids,),
            ).fetchall()
        return {r[0]: (r[1], int(r[2]), r[3]) for r in rows}

    def owner(self, execution_id: str) -> tuple[str, int] | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT node_id, epoch FROM orbit_owners WHERE execution_id = %s",
                (execution_id,),
            ).fetchone()
        return None if row is None else (row[0], int(row[1]))

    def reserve_gate(self, gate: str) -> tuple[str, int]:
        """A flow gate's ownership row (orbit_core/engine/flow_gates.py),
        written for this node unless one exists; its holder either way."""
        with self._conn() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO orbit_owners (execution_id, root_id, node_id, epoch, since_ms) "
                "VALUES (%s, %s, %s, 1, " + NOW_MS + ") ON CONFLICT (execution_id) DO NOTHING",
                (gate, gate, self.node_id),
            )
            row = conn.execute(
                "SELECT node_id, epoch FROM orbit_owners WHERE execution_id = %s", (gate,)
            ).fetchone()
        assert row is not None  # (gate rows are never deleted)
        return row[0], int(row[1])

    # ---- step slots

    def take_step_slot(self, slot: StepSlot, limit: int, priority: int, since_ms: int) -> bool:
        """Takes a slot of a step's concurrency when its scope has fewer than
        `limit` and no other unit's waiting row is ahead; refused, writes the
        unit's waiting row (module docstring). True when held, also when held
        already."""
        params = {
            "e": slot.execution_id,
            "u": slot.unit_key,
            "r": slot.run,
            "o": slot.offer_seq,
            "f": slot.flow,
            "k": slot.key,
            "limit": limit,
            "p": priority,
            "s": since_ms,
        }
        with self._conn() as conn, conn.transaction():
            # Every later statement of the transaction sees the slots and
            # waiting rows committed before the lock was granted.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (STEP_SLOT_LOCK_KEY, f"{slot.flow}/{slot.key}"),
            )
            row = conn.execute(_TAKE_STEP_SLOT, params).fetchone()
        return bool(row is not None and row[0])

    def step_slots_of(self, execution_ids: list[str]) -> list[StepSlot]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT flow, key, execution_id, unit_key, run, offer_seq FROM orbit_step_slots "
                "WHERE execution_id = ANY(%s)",
                (execution_ids,),
            ).fetchall()
        return [StepSlot(r[0], r[1], r[2], r[3], int(r[4]), int(r[5])) for r in rows]

    def free_step_slots(self, slots: list[StepSlot]) -> None:
        if not slots:
            return
        with self._conn() as conn:
            _delete_slots(conn, slots, unless_owned_by_other=self.node_id)

    def sweep_step_rows(self) -> int:
        with self._conn() as conn:
            row = conn.execute(
                _SWEEP_STEP_ROWS, {"ended": sorted(s.value for s in _ENDED)}
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def step_waits_of(self, execution_ids: list[str]) -> list[StepWait]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT flow, key, execution_id, unit_key, run, offer_seq, priority, since_ms "
                "FROM orbit_step_waits WHERE execution_id = ANY(%s)",
                (execution_ids,),
            ).fetchall()
        return [
            StepWait(StepSlot(r[0], r[1], r[2], r[3], int(r[4]), int(r[5])), int(r[6]), int(r[7]))
            for r in rows
        ]

    def free_step_waits(self, waits: list[StepSlot]) -> None:
        if not waits:
            return
        with self._conn() as conn:
            _delete_waits(conn, waits)

    def take_step_token(
        self, flow: str, key: str, take: Callable[[int], int | None]
    ) -> tuple[bool, int]:
        """Takes a token of a step's rate from its bucket in `orbit_flow_rates`
        (the row is held meanwhile, so servers take tokens one at a time)."""
        with self._conn() as conn, conn.transaction():
            if not self._rates_ready:
                for statement in rates.create_statements(postgresql.dialect()):  # type: ignore[no-untyped-call]
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO orbit_flow_rates (workflow, rate_key, tat_us) VALUES (%s, %s, 0) "
                "ON CONFLICT DO NOTHING",
                (flow, key),
            )
            row = conn.execute(
                "SELECT tat_us FROM orbit_flow_rates WHERE workflow = %s AND rate_key = %s "
                "FOR UPDATE",
                (flow, key),
            ).fetchone()
            tat = int(row[0]) if row is not None else 0
            new = take(tat)
            if new is not None:
                conn.execute(
                    "UPDATE orbit_flow_rates SET tat_us = %s WHERE workflow = %s AND rate_key = %s",
                    (new, flow, key),
                )
        self._rates_ready = True
        return (False, tat) if new is None else (True, new)

    # ---- the task queue

    def claim_for(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        sessions: list[tuple[str, str]],
        token: Callable[[str], str],
        keep: Callable[[int], bool] | None = None,
    ) -> list[Claim]:
        """Claims queued tasks that sessions with these contracts and runtime
        can take (this node's first, then the oldest), at most one per
        (session id, worker id), in one transaction; the i-th claim is the
        i-th session's. With `keep`, a session gets a task only if
        `keep(its index)` says so, asked in order once a task is found for
        it (the claims go to the sessions it kept, in order). When another
        node owns a claimed task's execution, a `dispatched` entry goes to
        that owner's inbox in the same transaction."""
        # (Each pair once: the same pair twice would lock the same rows.)
        pairs = list(dict.fromkeys(contracts))
        if not pairs or not sessions:
            return []
        language = runtime != "*"
        params: list[Any] = [[p[0] for p in pairs], [p[1] for p in pairs]]
        if language:
            params.append(runtime)
        with self._conn() as conn, conn.transaction():
            # This node's own tasks, so that their dispatch and result need
            # no inbox; another node's when it comes before this node's
            # first in the board's order (a higher priority, an earlier
            # virtual time), when this node has none, or, of two equal in
            # both, when it is LOCAL_LEAD_MS older than this node's first
            # (so no task waits on a busy node for long). (A task is queued
            # only once no poll on its owner took it.) Two statements, each
            # reading its index in order; what is locked and not taken is
            # free again at the commit.
            n = len(sessions)
            mine = conn.execute(
                _claim_select(language, mine=True, before=False),
                [*params, self.node_id, n, n],
            ).fetchall()
            first: list[Any] = []
            if mine:
                p, vt, at = int(mine[0][7]), float(mine[0][8]), int(mine[0][6]) - LOCAL_LEAD_MS
                first = [p, p, vt, vt, at]
            others = conn.execute(
                _claim_select(language, mine=False, before=bool(mine)),
                [*params, self.node_id, *first, n, n],
            ).fetchall()
            rows = sorted(mine + others, key=_board_place)[:n]
            if not rows:
                return []
            owners = dict(
                conn.execute(
                    "SELECT execution_id, node_id FROM orbit_owners WHERE execution_id = ANY(%s)",
                    ([r[1] for r in rows],),
                ).fetchall()
            )
            elsewhere_ids = [eid for eid, node in owners.items() if node != self.node_id]
            if elsewhere_ids:
                # Locked, so that a take-over of the owner waits for this
                # claim's `dispatched` entry (and then leaves the task
                # claimed). This node's own executions need no lock: a claim
                # of one taken over meanwhile is refused by the fence.
                for eid in elsewhere_ids:
                    del owners[eid]
                owners.update(
                    conn.execute(
                        "SELECT execution_id, node_id FROM orbit_owners "
                        "WHERE execution_id = ANY(%s) FOR SHARE",
                        (elsewhere_ids,),
                    ).fetchall()
                )
            # A task of an execution with no owner is one that ended (a task
            # put back by a server that lost its execution): never wanted.
            ended = [r[0] for r in rows if r[1] not in owners]
            if ended:
                conn.execute("DELETE FROM orbit_tasks WHERE id = ANY(%s)", (ended,))
                rows = [r for r in rows if r[1] in owners]
            taken: list[tuple[str, str]] = []
            for i, session in enumerate(sessions):
                if len(taken) == len(rows):
                    break
                if keep is None or keep(i):
                    taken.append(session)
            rows = rows[: len(taken)]  # the others stay queued
            if not rows:
                return []
            tokens = [token(row[1]) for row in rows]
            conn.execute(
                "UPDATE orbit_tasks t SET state = 'claimed', token = v.token, claimed_by = %s, "
                "session_id = v.session_id FROM unnest(%b::bigint[], %b::text[], %b::text[]) "
                "AS v(id, token, session_id) WHERE t.id = v.id",
                (self.node_id, [r[0] for r in rows], tokens, [s[0] for s in taken]),
            )
            _advance_clock(conn, rows)
            claims = []
            elsewhere = []
            for row, claimed, (session_id, worker_id) in zip(rows, tokens, taken, strict=True):
                _task_id, eid, key, offer, timeout_ms, assignment = row[:6]
                owner_id = owners[eid]
                if owner_id != self.node_id:
                    elsewhere.append(
                        (
                            eid,
                            {
                                "unit_key": key,
                                "offer_seq": int(offer),
                                "token": claimed,
                                "session_id": session_id,
                                "worker_id": worker_id,
                            },
                        )
                    )
                claims.append(
                    Claim(
                        eid,
                        key,
                        int(offer),
                        claimed,
                        None if timeout_ms is None else int(timeout_ms),
                        orjson.loads(assignment),
                        owner_id,
                    )
                )
            if elsewhere:
                self._put_many(conn, "dispatched", elsewhere)
            return claims

    def unclaim(self, token: str) -> None:
        """Puts a claimed task back on the queue (its dispatch failed here)."""
        with self._conn() as conn:
            conn.execute(
                "UPDATE orbit_tasks SET state = 'queued', token = NULL, claimed_by = NULL, "
                "session_id = NULL WHERE token = %s AND state = 'claimed'",
                (token,),
            )
            conn.execute("SELECT pg_notify('orbit_tasks', '')")

    def drop_claim(self, token: str) -> None:
        """Deletes a claimed task its owner no longer wants (its unit ended or
        was offered again while it was being claimed): put back, it would
        only be claimed and refused again."""
        with self._conn() as conn:
            conn.execute("DELETE FROM orbit_tasks WHERE token = %s AND state = 'claimed'", (token,))

    def queued(self) -> int:
        with self._conn() as conn:
            row = conn.execute("SELECT count(*) FROM orbit_tasks WHERE state = 'queued'").fetchone()
        return int(row[0]) if row else 0

    # ---- the inbox

    def _put(self, conn: psycopg.Connection[Any], eid: str, kind: str, payload: Any) -> int:
        return self._put_many(conn, kind, [(eid, payload)])[0]

    def _put_many(
        self, conn: psycopg.Connection[Any], kind: str, entries: list[tuple[str, Any]]
    ) -> list[int]:
        """Inbox entries for the owners of these executions; their seqs."""
        rows = conn.execute(
            "INSERT INTO orbit_inbox (execution_id, kind, payload, sender, state, created_ms) "
            "SELECT e, %s, p, %s, 'pending', " + NOW_MS + " "
            "FROM unnest(%b::text[], %b::text[]) AS v(e, p) RETURNING seq",
            (
                kind,
                self.node_id,
                [e[0] for e in entries],
                [orjson.dumps(e[1]).decode() for e in entries],
            ),
        ).fetchall()
        conn.execute(
            "SELECT pg_notify('orbit_inbox', e) FROM unnest(%b::text[]) AS e",
            (sorted({e[0] for e in entries}),),
        )
        return [int(r[0]) for r in rows]

    def put(self, execution_id: str, kind: str, payload: Any) -> int:
        """An entry for the owner of the execution; returns its seq."""
        with self._conn() as conn, conn.transaction():
            return self._put(conn, execution_id, kind, payload)

    def pending(self, limit: int = 200) -> list[InboxEntry]:
        """The entries for executions this node owns, oldest first."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT i.seq, i.execution_id, i.kind, i.payload, i.sender FROM orbit_inbox i "
                "JOIN orbit_owners o ON o.execution_id = i.execution_id "
                "WHERE i.state = 'pending' AND o.node_id = %s ORDER BY i.seq LIMIT %s",
                (self.node_id, limit),
            ).fetchall()
        return [InboxEntry(int(r[0]), r[1], r[2], orjson.loads(r[3]), r[4]) for r in rows]

    def pending_for(self, execution_ids: list[str]) -> list[InboxEntry]:
        """The pending entries of these executions (named by the notifications
        of their `put`s) that this node owns, oldest first. Every server
        hears each notification: one still holding a stale copy of an
        execution it lost must not apply its entries, whose refusals (a
        dispatch no longer wanted, an unknown token) commit nothing for the
        fence to stop, and would be the only answer the sender gets."""
        if not execution_ids:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT i.seq, i.execution_id, i.kind, i.payload, i.sender FROM orbit_inbox i "
                "JOIN orbit_owners o ON o.execution_id = i.execution_id "
                "WHERE i.execution_id = ANY(%s) AND i.state = 'pending' AND o.node_id = %s "
                "ORDER BY i.seq",
                (execution_ids, self.node_id),
            ).fetchall()
        return [InboxEntry(int(r[0]), r[1], r[2], orjson.loads(r[3]), r[4]) for r in rows]

    def done(self, replies: list[tuple[InboxEntry, Any]]) -> None:
        """Ends applied entries: those a sender waits for (`REPLIED`) keep
        their reply for it, the others go (most went with the commit that
        applied them; not those the engine refused with an error)."""
        waited = [
            (e.seq, orjson.dumps(reply).decode()) for e, reply in replies if e.kind in REPLIED
        ]
        gone = [e.seq for e, _ in replies if e.kind not in REPLIED]
        with self._conn() as conn:
            if gone:
                conn.execute("DELETE FROM orbit_inbox WHERE seq = ANY(%s)", (gone,))
            if waited:
                conn.execute(
                    "UPDATE orbit_inbox i SET state = 'done', reply = v.reply "
                    "FROM unnest(%b::bigint[], %b::text[]) AS v(seq, reply) WHERE i.seq = v.seq",
                    ([w[0] for w in waited], [w[1] for w in waited]),
                )
                conn.execute("SELECT pg_notify('orbit_replies', '')")

    def reply(self, seq: int) -> tuple[bool, Any]:
        """(applied, reply) of an entry; a read reply is deleted."""
        with self._conn() as conn:
            row = conn.execute(
                "DELETE FROM orbit_inbox WHERE seq = %s AND state = 'done' RETURNING reply",
                (seq,),
            ).fetchone()
        if row is None:
            return False, None
        return True, orjson.loads(row[0]) if row[0] is not None else None

    def withdraw(self, seq: int) -> bool:
        """Takes back an entry nobody applied yet; False once it was applied."""
        with self._conn() as conn:
            row = conn.execute(
                "DELETE FROM orbit_inbox WHERE seq = %s AND state = 'pending' RETURNING seq",
                (seq,),
            ).fetchone()
        return row is not None

    def sweep(self, older_than_ms: int) -> None:
        """Deletes entries nobody needs any more: replies never read, and
        entries of executions that ended (no owner) before they were applied."""
        with self._conn() as conn:
            conn.execute(
                "DELETE FROM orbit_inbox i WHERE i.created_ms < "
                + NOW_MS
                + " - %s AND (i.state <> 'pending' OR NOT EXISTS "
                "(SELECT 1 FROM orbit_owners o WHERE o.execution_id = i.execution_id))",
                (older_than_ms,),
            )
            # Waits a server that stopped left behind (no wait is that long).
            conn.execute(
                "DELETE FROM orbit_waits WHERE since_ms < " + NOW_MS + " - %s",
                (max(older_than_ms, WAITS_KEPT_MS),),
            )

    def watch(self, execution_id: str) -> int:
        """Lists a wait for the end of an execution owned elsewhere, so that
        its owner announces the end (NOTIFY orbit_done); returns what
        `unwatch` takes."""
        with self._conn() as conn:
            row = conn.execute(
                "INSERT INTO orbit_waits (execution_id, node_id, since_ms) "
                "VALUES (%s, %s, " + NOW_MS + ") RETURNING id",
                (execution_id, self.node_id),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def unwatch(self, watch: int) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM orbit_waits WHERE id = %s", (watch,))

    def vacuum(self) -> None:
        """Vacuums the queue and the inbox. Their rows live for milliseconds,
        and a claim or an inbox read walks its index from the oldest entry:
        until a vacuum removes the entries of deleted and claimed rows, every
        read goes through all of them (autovacuum looks once a minute)."""
        with self._conn() as conn:
            conn.execute("VACUUM (SKIP_LOCKED) orbit_tasks, orbit_inbox")
            # Fairness keys the clock passed: their next task starts from
            # the clock, as a key with no row does.
            conn.execute(
                "DELETE FROM orbit_board_keys k USING orbit_board_clock c "
                "WHERE c.task_name = k.task_name AND k.vt <= c.vt"
            )

    # ---- sessions

    def put_session(self, row: SessionRow) -> None:
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO orbit_sessions (session_id, worker_id, runtime, contracts, sdk, "
                "registered_ms, last_seen_ms) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (session_id) DO NOTHING",
                (
                    row.session_id,
                    row.worker_id,
                    row.runtime,
                    orjson.dumps(row.contracts).decode(),
                    row.sdk,
                    row.registered_ms,
                    row.last_seen_ms,
                ),
            )

    def sessions(self, ids: list[str]) -> list[SessionRow]:
        if not ids:
            return []
        return self._sessions("session_id = ANY(%s)", ids)

    def sessions_seen_since(self, since_ms: int) -> list[SessionRow]:
        """Every session in contact with any server since `since_ms`."""
        return self._sessions("last_seen_ms >= %s", since_ms)

    def _sessions(self, where: str, param: object) -> list[SessionRow]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT session_id, worker_id, runtime, contracts, sdk, registered_ms, "
                "last_seen_ms FROM orbit_sessions WHERE " + where,
                (param,),
            ).fetchall()
        return [
            SessionRow(
                r[0],
                r[1],
                r[2],
                [(c[0], c[1]) for c in orjson.loads(r[3])],
                r[4],
                int(r[5]),
                int(r[6]),
            )
            for r in rows
        ]

    def touch_sessions(self, seen: dict[str, int]) -> None:
        if not seen:
            return
        with self._conn() as conn:
            conn.execute(
                "UPDATE orbit_sessions s SET last_seen_ms = GREATEST(s.last_seen_ms, v.at) "
                "FROM unnest(%b::text[], %b::bigint[]) AS v(id, at) WHERE s.session_id = v.id",
                (list(seen), list(seen.values())),
            )

    def drop_session(self, session_id: str) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM orbit_sessions WHERE session_id = %s", (session_id,))
            conn.execute("DELETE FROM orbit_cancels WHERE session_id = %s", (session_id,))

    def post_cancels(self, cancels: dict[str, list[str]]) -> None:
        """Attempts each session should stop, for its next heartbeat anywhere."""
        rows = [(sid, token) for sid, tokens in cancels.items() for token in tokens]
        if not rows:
            return
        with self._conn() as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO orbit_cancels (session_id, token) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                rows,
            )

    def take_cancels(self, session_id: str) -> list[str]:
        """The tokens posted for the session, removed as they are read."""
        with self._conn() as conn:
            rows = conn.execute(
                "DELETE FROM orbit_cancels WHERE session_id = %s RETURNING token", (session_id,)
            ).fetchall()
        return sorted(r[0] for r in rows)


class Listener:
    """One connection that LISTENs on the shared channels. Each channel has
    its own serial, raised by every batch of its notifications: `wait`
    returns when the channel's serial passed `seen` (or the timeout), and
    `subscribe`d callbacks get each batch's payloads on the listening
    thread. Missing one is harmless: every waiter also looks again on its
    own schedule, and a new connection raises every serial and calls every
    callback with None (what came while none listened is lost)."""

    CHANNELS = ("orbit_tasks", "orbit_inbox", "orbit_replies", "orbit_done", "orbit_defs")
    WAIT_S = 0.5  # how often the listening thread looks at `close`

    def __init__(self, store: PostgresStore, node_id: str) -> None:
        self._store = store
        self._name = f"orbit-listen:{node_id}"
        self._cond = threading.Condition()
        self._serials = dict.fromkeys(self.CHANNELS, 0)
        self._callbacks: dict[str, list[Callable[[list[str] | None], None]]] = {
            c: [] for c in self.CHANNELS
        }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="orbit-listen", daemon=True)
        self._thread.start()

    def serial(self, channel: str) -> int:
        return self._serials[channel]

    def wait(self, channel: str, seen: int, timeout: float) -> int:
        """Blocks until a notification on `channel` after `seen` (a `serial`)
        or `timeout`."""
        with self._cond:
            if self._serials[channel] == seen:
                self._cond.wait_for(lambda: self._serials[channel] != seen, timeout)
            return self._serials[channel]

    def subscribe(self, channel: str, callback: Callable[[list[str] | None], None]) -> None:
        """Calls `callback` (quick, never raising) with the payloads of each
        batch of notifications on `channel` (None: there may have been any)."""
        self._callbacks[channel].append(callback)

    def _raise(self, batches: dict[str, list[str] | None]) -> None:
        with self._cond:
            for channel in batches:
                self._serials[channel] += 1
            self._cond.notify_all()
        for channel, payloads in batches.items():
            for callback in self._callbacks[channel]:
                callback(payloads)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn = self._store.session(self._name)
            except StorageError:
                self._stop.wait(1.0)
                continue
            try:
                for channel in self.CHANNELS:
                    conn.execute(f"LISTEN {channel}")
                self._raise(dict.fromkeys(self.CHANNELS))
                while not self._stop.is_set():
                    # The first notification ends the wait (`notifies` would
                    # otherwise go on until its timeout); those that came
                    # with it are taken too.
                    notes = list(conn.notifies(timeout=self.WAIT_S, stop_after=1))
                    if not notes:
                        continue
                    notes.extend(conn.notifies(timeout=0))
                    batches: dict[str, list[str] | None] = {}
                    for note in notes:
                        batch = batches.setdefault(note.channel, [])
                        assert batch is not None
                        batch.append(note.payload)
                    self._raise(batches)
            except psycopg.Error:
                self._stop.wait(0.5)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


# A take of a step slot (`SharedTables.take_step_slot`), under the scope's
# advisory lock, as one statement: `held` (this offer holds a slot already:
# yes), else `taken` (inserted while the scope has fewer than `limit` slots
# and no other unit's waiting row is ahead: higher priority, then earlier,
# then execution id and unit key in code point order, as the engines order
# their lines); the unit's waiting row is deleted when it holds a slot, and
# written or replaced when it does not.
_TAKE_STEP_SLOT = (
    "WITH held AS (SELECT 1 FROM orbit_step_slots WHERE execution_id = %(e)s "
    "AND unit_key = %(u)s AND run = %(r)s AND offer_seq = %(o)s), "
    "taken AS (INSERT INTO orbit_step_slots (execution_id, unit_key, run, offer_seq, flow, "
    "key, since_ms) SELECT %(e)s, %(u)s, %(r)s, %(o)s, %(f)s, %(k)s, " + NOW_MS + " "
    "WHERE NOT EXISTS (SELECT 1 FROM held) "
    "AND (SELECT count(*) FROM orbit_step_slots WHERE flow = %(f)s AND key = %(k)s) < %(limit)s "
    "AND NOT EXISTS (SELECT 1 FROM orbit_step_waits w WHERE w.flow = %(f)s AND w.key = %(k)s "
    "AND (w.execution_id, w.unit_key) <> (%(e)s, %(u)s) "
    'AND (-w.priority, w.since_ms, w.execution_id COLLATE "C", w.unit_key COLLATE "C") '
    '< (-(%(p)s::bigint), %(s)s::bigint, %(e)s::text COLLATE "C", %(u)s::text COLLATE "C")) '
    "ON CONFLICT DO NOTHING RETURNING 1), "
    "gone AS (DELETE FROM orbit_step_waits WHERE execution_id = %(e)s AND unit_key = %(u)s "
    "AND (EXISTS (SELECT 1 FROM held) OR EXISTS (SELECT 1 FROM taken))), "
    "waiting AS (INSERT INTO orbit_step_waits (execution_id, unit_key, run, offer_seq, flow, "
    "key, priority, since_ms) SELECT %(e)s, %(u)s, %(r)s, %(o)s, %(f)s, %(k)s, %(p)s, %(s)s "
    "WHERE NOT EXISTS (SELECT 1 FROM held) AND NOT EXISTS (SELECT 1 FROM taken) "
    "ON CONFLICT (execution_id, unit_key) DO UPDATE SET run = EXCLUDED.run, "
    "offer_seq = EXCLUDED.offer_seq, flow = EXCLUDED.flow, key = EXCLUDED.key, "
    "priority = EXCLUDED.priority, since_ms = EXCLUDED.since_ms) "
    "SELECT EXISTS (SELECT 1 FROM held) OR EXISTS (SELECT 1 FROM taken)"
)


# The rows of ended executions (`SharedTables.sweep_step_rows`): both tables
# are small (only what is held or waiting), each row looked up by key. A row
# of a later run than the ended one is a restart's, taken before its commit.
_ENDED_RUN = (
    "e.execution_id = {t}.execution_id AND e.status = ANY(%(ended)s) AND {t}.run <= "
    "COALESCE((SELECT max(a.run) FROM execution_run_events a "
    "WHERE a.execution_id = e.execution_id), 0) + 1"
)
_SWEEP_STEP_ROWS = (
    "WITH slots AS (DELETE FROM orbit_step_slots s USING workflow_executions e WHERE "
    + _ENDED_RUN.format(t="s")
    + " RETURNING 1), waits AS (DELETE FROM orbit_step_waits w USING workflow_executions e "
    "WHERE " + _ENDED_RUN.format(t="w") + " RETURNING 1) "
    "SELECT (SELECT count(*) FROM slots) + (SELECT count(*) FROM waits)"
)


def _delete_waits(db: Any, waits: list[StepSlot]) -> None:
    """Deletes these waiting rows, each only while it is still that offer's."""
    db.execute(
        "DELETE FROM orbit_step_waits s USING unnest(%b::text[], %b::text[], "
        "%b::bigint[], %b::bigint[]) AS g(e, k, r, o) WHERE s.execution_id = g.e "
        "AND s.unit_key = g.k AND s.run = g.r AND s.offer_seq = g.o",
        (
            [x.execution_id for x in waits],
            [x.unit_key for x in waits],
            [x.run for x in waits],
            [x.offer_seq for x in waits],
        ),
    )


def _delete_slots(
    db: Any, slots: list[StepSlot], *, unless_owned_by_other: str | None = None
) -> None:
    """Deletes these step slots' rows (`db`: a connection or a cursor); with
    `unless_owned_by_other` (this node's id), not those of executions another
    node owns (`SharedTables.free_step_slots`)."""
    fence = (
        ""
        if unless_owned_by_other is None
        else " AND NOT EXISTS (SELECT 1 FROM orbit_owners w WHERE w.execution_id = s.execution_id "
        "AND w.node_id <> %b)"
    )
    extra = () if unless_owned_by_other is None else (unless_owned_by_other,)
    db.execute(
        "DELETE FROM orbit_step_slots s USING unnest(%b::text[], %b::text[], "
        "%b::bigint[], %b::bigint[]) AS g(e, k, r, o) WHERE s.execution_id = g.e "
        "AND s.unit_key = g.k AND s.run = g.r AND s.offer_seq = g.o" + fence,
        (
            [x.execution_id for x in slots],
            [x.unit_key for x in slots],
            [x.run for x in slots],
            [x.offer_seq for x in slots],
            *extra,
        ),
    )
