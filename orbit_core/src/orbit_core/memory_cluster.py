"""The coordination of servers sharing executions, in memory: a real fake
of the database adapters (as `memory_store` is of the store), for the
deterministic simulation of shared mode in orbit_core/tests.

`MemoryCluster` is what the database holds for all servers: the store's
rows (one `MemoryStore`), the owners of running executions with their
epochs and roots, the task board, the mailboxes, listed waits, sessions,
posted cancellations, the slots of step `concurrency` limits and
heartbeats (on the given clock). `MemoryNode` is
one server's view: its `Store` (commits fenced on ownership, as the
database fences them), its coordination `Tables` and the `Announcements`.

Messages are delivered as they are put: `deliver` (set by whoever runs the
nodes) is called with the owner's node id after each `put`, outside the
cluster's lock, so a sender that waits for a reply finds it at once when
the owner is up, and none when it is not."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from orbit_core import events as ev
from orbit_core.api import ExecutionStatus
from orbit_core.coordination import (
    DONE,
    INBOX,
    REPLIED,
    REPLIES,
    TASKS,
    Claim,
    InboxEntry,
    SessionRow,
    waits_ahead,
)
from orbit_core.errors import StorageError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import Clock, CommitBatch, StepSlot, StepWait, TaskOffer
from orbit_core.state import TERMINAL

_ENDED = frozenset(TERMINAL - {ExecutionStatus.CONTINUED_AS_NEW})
_UNIT_ENDS = (ev.StepCancelled, ev.StepSkipped, ev.StepFailed, ev.StepSucceeded)


@attrs.define(slots=True)
class _Owner:
    node: str
    epoch: int
    root: str


@attrs.define(slots=True)
class _Task:
    offer: TaskOffer
    node: str
    order: int
    token: str | None = None
    # Its virtual time in the board's fairness order (`MemoryNode._queue`).
    vt: float = 0.0


@attrs.define(slots=True)
class _Message:
    entry: InboxEntry
    state: str = "pending"  # applied (by a commit), done (replied)
    reply: Any = None


class MemoryCluster:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.data = MemoryStore()
        self.lock = threading.RLock()
        self.owners: dict[str, _Owner] = {}
        self.board: dict[int, _Task] = {}
        self.inbox: dict[int, _Message] = {}
        self.waits: dict[int, str] = {}
        self.sessions: dict[str, SessionRow] = {}
        self.cancels: dict[str, list[str]] = {}
        self.beats: dict[str, int] = {}
        # Step slots by holder: (execution id, unit key, run, offer seq).
        self.slots: dict[tuple[str, str, int, int], StepSlot] = {}
        # The units waiting for a step slot, one row per unit, as
        # orbit_step_waits holds them: (execution id, unit key) to the
        # waiting offer (a StepSlot) and its (priority, since_ms).
        self.step_waits: dict[tuple[str, str], tuple[StepSlot, int, int]] = {}
        # The buckets of step rates: (flow, key) to the bucket's time.
        self.buckets: dict[tuple[str, str], int] = {}
        # The board's virtual times, as orbit_board_clock and
        # orbit_board_keys hold them: per task name, the time of the task
        # claimed last; per fairness key, the time of its latest task.
        self.board_clock: dict[str, float] = {}
        self.key_times: dict[str, float] = {}
        self.serials = dict.fromkeys((TASKS, INBOX, REPLIES, DONE), 0)
        self._seq = itertools.count(1)
        self.deliver: Callable[[str], None] = lambda node_id: None

    def node(self, node_id: str) -> MemoryNode:
        return MemoryNode(self, node_id)

    def announce(self, channel: str) -> None:
        self.serials[channel] += 1

    def next_seq(self) -> int:
        return next(self._seq)


class MemoryNode(MemoryStore):
    """One server's store, coordination tables and announcements."""

    def __init__(self, cluster: MemoryCluster, node_id: str) -> None:
        super().__init__()
        self._share(cluster.data)
        self.cluster = cluster
        self.node_id = node_id
        # What this node's engine holds: execution id to (root, epoch).
        self.owned: dict[str, tuple[str, int]] = {}
        self.on_lost: Callable[[list[str]], None] = lambda ids: None

    # ---- the store: fenced commits

    def load_active(self) -> list[tuple[str, list[ev.Event]]]:
        """What this node owned before it restarted, under a new epoch."""
        c = self.cluster
        with c.lock:
            self.owned = {}
            for eid, row in c.owners.items():
                if row.node == self.node_id:
                    row.epoch += 1
                    self.owned[eid] = (row.root, row.epoch)
        return self.histories(list(self.owned))

    def histories(self, execution_ids: list[str]) -> list[tuple[str, list[ev.Event]]]:
        out = []
        for eid in execution_ids:
            row = self.execution_row(eid)
            events = self.history(eid)
            if row is not None and row.status not in _ENDED and events:
                out.append((eid, events))
        return out

    def commit(self, batch: CommitBatch) -> None:
        c = self.cluster
        with c.lock:
            lost = []
            new = {ch.execution_id for ch in batch.executions if ch.new}
            # Offers too: a group that only offers tasks (publish_stale) of an
            # execution this node lost must not put them on the board.
            changed = {ch.execution_id for ch in batch.executions} | {
                o.execution_id for o in batch.offers
            }
            # The flow gates its new executions join (engine/flow_gates.py).
            changed |= {ch.root for ch in batch.executions if ch.new and ch.root is not None}
            for eid in sorted(changed - new):
                row, held = c.owners.get(eid), self.owned.get(eid)
                if row is None or held is None or (row.node, row.epoch) != (self.node_id, held[1]):
                    lost.append(eid)
            if lost:
                self.on_lost(lost)
                raise StorageError(f"fenced: executions {sorted(lost)} are not this node's")
            super().commit(batch)
            for slot in batch.freed_slots:
                c.slots.pop(_holder(slot), None)
            _free_waits(c, batch.freed_waits)
            self._own(batch)
            self._queue(batch)
            for sent in batch.messages:
                # Applied by the owner's next inbox round (not delivered at
                # once: this runs on the committing engine's own thread).
                self._put(sent.target, sent.kind, sent.payload)
            for receipt in batch.receipts:
                message = c.inbox.get(int(receipt))
                if message is None or message.state != "pending":
                    continue
                if message.entry.kind in REPLIED:
                    message.state = "applied"
                else:
                    del c.inbox[message.entry.seq]

    def _own(self, batch: CommitBatch) -> None:
        c = self.cluster
        for change in batch.executions:
            eid = change.execution_id
            if change.new:
                root = change.root or eid
                created = change.events[0] if change.events else None
                if (
                    isinstance(created, ev.WorkflowCreated)
                    and created.parent is not None
                    and change.root is None
                ):
                    # (A gated child joins its flow gate's tree: `root`.)
                    parent = created.parent["execution_id"]
                    root = self.owned.get(parent, (parent, 0))[0]
                c.owners[eid] = _Owner(self.node_id, 1, root)
                self.owned[eid] = (root, 1)
            if change.row.status in _ENDED:
                c.owners.pop(eid, None)
                self.owned.pop(eid, None)
                if eid in c.waits.values():
                    c.announce(DONE)

    def _queue(self, batch: CommitBatch) -> None:
        c = self.cluster
        later: dict[tuple[str, str], int] = {}
        ended: set[str] = set()
        for change in batch.executions:
            eid = change.execution_id
            if change.row.status in _ENDED or change.archive_run is not None:
                ended.add(eid)
                for number in [n for n, t in c.board.items() if t.offer.execution_id == eid]:
                    del c.board[number]
                continue
            for event in change.events:
                if isinstance(event, ev.StepDispatched):
                    token: str | None = event.token
                elif isinstance(event, _UNIT_ENDS):
                    token = None
                else:
                    continue
                later[(eid, event.step)] = event.seq
                for number, task in list(c.board.items()):
                    o = task.offer
                    if (o.execution_id, o.unit_key) == (eid, event.step) and (
                        task.token is None or task.token == token
                    ):
                        del c.board[number]
        offers = [
            o
            for o in batch.offers
            if o.execution_id not in ended
            and later.get((o.execution_id, o.unit_key), 0) < o.offer_seq
        ]
        # One entry per offer, as the database's unique key keeps it: an
        # offer made again while its entry is still there (queued, or claimed
        # by a poll) adds nothing, except that it queues again an entry a
        # claim left behind (its dispatch failed, and so did putting it
        # back) unless the claim's `dispatched` message still waits.
        held = {
            (t.offer.execution_id, t.offer.unit_key, t.offer.offer_seq): t for t in c.board.values()
        }
        for offer in offers:
            key = (offer.execution_id, offer.unit_key, offer.offer_seq)
            same = held.get(key)
            if same is not None:
                if same.token is not None and not self._dispatch_waits(same.token):
                    same.token = None
                continue
            number = c.next_seq()
            held[key] = c.board[number] = _Task(offer, self.node_id, number, vt=_place(c, offer))
        if offers:
            c.announce(TASKS)

    def _dispatch_waits(self, token: str) -> bool:
        """Whether a claim's `dispatched` message waits in its owner's inbox."""
        return any(
            m.entry.kind == "dispatched"
            and m.state == "pending"
            and m.entry.payload["token"] == token
            for m in self.cluster.inbox.values()
        )

    # ---- ownership, heartbeats, take-overs

    def owner(self, execution_id: str) -> tuple[str, int] | None:
        with self.cluster.lock:
            row = self.cluster.owners.get(execution_id)
            return None if row is None else (row.node, row.epoch)

    def reserve_gate(self, gate: str) -> tuple[str, int]:
        with self.cluster.lock:
            row = self.cluster.owners.setdefault(gate, _Owner(self.node_id, 1, gate))
            return row.node, row.epoch

    def owners(self, execution_ids: list[str]) -> dict[str, tuple[str, int, str]]:
        """(node, epoch, root) of each of these executions that has an owner."""
        with self.cluster.lock:
            rows = {e: self.cluster.owners.get(e) for e in execution_ids}
            return {e: (r.node, r.epoch, r.root) for e, r in rows.items() if r is not None}

    def owns(self, execution_id: str) -> bool:
        """Whether this node's store holds the execution (its `owned`)."""
        with self.cluster.lock:
            return execution_id in self.owned

    def owned_rows(self) -> dict[str, int]:
        with self.cluster.lock:
            return {e: r.epoch for e, r in self.cluster.owners.items() if r.node == self.node_id}

    def disown(self, execution_ids: Iterable[str]) -> None:
        with self.cluster.lock:
            for eid in execution_ids:
                self.owned.pop(eid, None)

    def adopt(self, rows: Iterable[tuple[str, str, int]]) -> None:
        with self.cluster.lock:
            for eid, root, epoch in rows:
                self.owned[eid] = (root, epoch)

    def heartbeat(self) -> None:
        with self.cluster.lock:
            self.cluster.beats[self.node_id] = self.cluster.clock.now_ms()

    def live_nodes(self, timeout_ms: int) -> list[str]:
        c = self.cluster
        with c.lock:
            now = c.clock.now_ms()
            return sorted(n for n, at in c.beats.items() if now - at <= timeout_ms)

    def orphaned_roots(self, timeout_ms: int) -> list[tuple[str, str]]:
        live = set(self.live_nodes(timeout_ms))
        with self.cluster.lock:
            return sorted(
                {(r.root, r.node) for r in self.cluster.owners.values() if r.node not in live}
            )

    def take_over(self, roots: list[str], dead: str) -> list[tuple[str, str, int]]:
        """Moves the dead node's trees to this node (epochs raised); its own
        claims are offered again."""
        c = self.cluster
        moved = []
        with c.lock:
            for eid, row in sorted(c.owners.items()):
                if row.root in roots and row.node == dead:
                    row.node, row.epoch = self.node_id, row.epoch + 1
                    moved.append((eid, row.root, row.epoch))
            ids = {m[0] for m in moved}
            for task in c.board.values():
                if task.offer.execution_id in ids and task.token is not None:
                    task.token = None
        return moved

    # ---- the task board

    def claim_for(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        sessions: list[tuple[str, str]],
        token: Callable[[str], str],
        keep: Callable[[int], bool] | None = None,
    ) -> list[Claim]:
        c = self.cluster
        wanted = set(contracts)
        claims: list[Claim] = []
        notify: set[str] = set()
        with c.lock:
            tasks = sorted(
                (
                    (number, t)
                    for number, t in c.board.items()
                    if t.token is None
                    and (t.offer.task, t.offer.contract_version) in wanted
                    and (runtime == "*" or t.offer.runtime in (None, runtime))
                ),
                # The board's order; of two tasks equal in it, this node's.
                key=lambda item: (
                    -item[1].offer.priority,
                    item[1].vt,
                    item[1].node != self.node_id,
                    item[1].order,
                ),
            )
            i = 0
            for number, task in tasks:
                o = task.offer
                owner = c.owners.get(o.execution_id)
                if owner is None:
                    del c.board[number]  # its execution ended
                    continue
                while i < len(sessions) and keep is not None and not keep(i):
                    i += 1
                if i >= len(sessions):
                    break
                session_id, worker_id = sessions[i]
                i += 1
                task.token = token(o.execution_id)
                c.board_clock[o.task] = max(c.board_clock.get(o.task, 0.0), task.vt)
                claims.append(
                    Claim(
                        o.execution_id,
                        o.unit_key,
                        o.offer_seq,
                        task.token,
                        o.timeout_ms,
                        dict(o.assignment),
                        owner.node,
                    )
                )
                if owner.node != self.node_id:
                    payload = {
                        "unit_key": o.unit_key,
                        "offer_seq": o.offer_seq,
                        "token": task.token,
                        "session_id": session_id,
                        "worker_id": worker_id,
                    }
                    self._put(o.execution_id, "dispatched", payload)
                    notify.add(owner.node)
        for node in sorted(notify):
            c.deliver(node)
        return claims

    def unclaim(self, token: str) -> None:
        with self.cluster.lock:
            for task in self.cluster.board.values():
                if task.token == token:
                    task.token = None

    def drop_claim(self, token: str) -> None:
        with self.cluster.lock:
            board = self.cluster.board
            for number in [n for n, t in board.items() if t.token == token]:
                del board[number]

    # ---- step slots

    def take_step_slot(self, slot: StepSlot, limit: int, priority: int, since_ms: int) -> bool:
        c = self.cluster
        unit = (slot.execution_id, slot.unit_key)
        with c.lock:
            if _holder(slot) in c.slots:
                c.step_waits.pop(unit, None)
                return True
            scope = (slot.flow, slot.key)
            mine = (priority, since_ms, *unit)
            if sum(1 for s in c.slots.values() if (s.flow, s.key) == scope) >= limit or any(
                waits_ahead((p, since, *other), mine)
                for other, (w, p, since) in c.step_waits.items()
                if (w.flow, w.key) == scope and other != unit
            ):
                c.step_waits[unit] = (slot, priority, since_ms)
                return False
            c.slots[_holder(slot)] = slot
            c.step_waits.pop(unit, None)
            return True

    def step_waits_of(self, execution_ids: list[str]) -> list[StepWait]:
        ids = set(execution_ids)
        with self.cluster.lock:
            return [
                StepWait(w, p, since)
                for w, p, since in self.cluster.step_waits.values()
                if w.execution_id in ids
            ]

    def free_step_waits(self, waits: list[StepSlot]) -> None:
        with self.cluster.lock:
            _free_waits(self.cluster, waits)

    def step_slots_of(self, execution_ids: list[str]) -> list[StepSlot]:
        ids = set(execution_ids)
        with self.cluster.lock:
            return [s for s in self.cluster.slots.values() if s.execution_id in ids]

    def free_step_slots(self, slots: list[StepSlot]) -> None:
        c = self.cluster
        with c.lock:
            for slot in slots:
                owner = c.owners.get(slot.execution_id)
                if owner is None or owner.node == self.node_id:
                    c.slots.pop(_holder(slot), None)

    def sweep_step_rows(self) -> int:
        c = self.cluster
        with c.lock:
            rows = {s.execution_id for s in c.slots.values()}
            rows.update(u[0] for u in c.step_waits)
            # (run: a row a restart of the ended execution took before its
            # commit is the new run's)
            ended = {
                eid: row.run
                for eid in rows
                if (row := c.data.execution_row(eid)) is not None and row.status in _ENDED
            }
            slots = [h for h, s in c.slots.items() if s.run <= ended.get(s.execution_id, 0)]
            waits = [u for u, w in c.step_waits.items() if w[0].run <= ended.get(u[0], 0)]
            for holder in slots:
                del c.slots[holder]
            for unit in waits:
                del c.step_waits[unit]
        return len(slots) + len(waits)

    def take_step_token(
        self, flow: str, key: str, take: Callable[[int], int | None]
    ) -> tuple[bool, int]:
        with self.cluster.lock:
            buckets = self.cluster.buckets
            tat = buckets.get((flow, key), 0)
            new = take(tat)
            if new is None:
                return False, tat
            buckets[(flow, key)] = new
            return True, new

    # ---- mailboxes

    def _put(self, execution_id: str, kind: str, payload: Any) -> int:
        c = self.cluster
        seq = c.next_seq()
        entry = InboxEntry(seq, execution_id, kind, payload, self.node_id)
        c.inbox[seq] = _Message(entry)
        c.announce(INBOX)
        return seq

    def put(self, execution_id: str, kind: str, payload: Any) -> int:
        c = self.cluster
        with c.lock:
            seq = self._put(execution_id, kind, payload)
            owner = c.owners.get(execution_id)
        if owner is not None:
            c.deliver(owner.node)
        return seq

    def pending(self, limit: int = 200) -> list[InboxEntry]:
        c = self.cluster
        with c.lock:
            mine = [
                m.entry
                for m in c.inbox.values()
                if m.state == "pending"
                and (o := c.owners.get(m.entry.execution_id)) is not None
                and o.node == self.node_id
            ]
        return sorted(mine, key=lambda e: e.seq)[:limit]

    def pending_for(self, execution_ids: list[str]) -> list[InboxEntry]:
        """The pending entries of these executions that this node owns (a
        server's look after a notification, which every server hears)."""
        ids = set(execution_ids)
        return [e for e in self.pending(len(self.cluster.inbox)) if e.execution_id in ids]

    def done(self, replies: list[tuple[InboxEntry, Any]]) -> None:
        c = self.cluster
        with c.lock:
            for entry, reply in replies:
                message = c.inbox.get(entry.seq)
                if message is None:
                    continue
                if entry.kind in REPLIED:
                    message.state, message.reply = "done", reply
                else:
                    del c.inbox[entry.seq]
            c.announce(REPLIES)

    def reply(self, seq: int) -> tuple[bool, Any]:
        with self.cluster.lock:
            message = self.cluster.inbox.get(seq)
            if message is None or message.state != "done":
                return False, None
            del self.cluster.inbox[seq]
            return True, message.reply

    def withdraw(self, seq: int) -> bool:
        with self.cluster.lock:
            message = self.cluster.inbox.get(seq)
            if message is None or message.state != "pending":
                return False
            del self.cluster.inbox[seq]
            return True

    # ---- waits on ends

    def watch(self, execution_id: str) -> int:
        with self.cluster.lock:
            number = self.cluster.next_seq()
            self.cluster.waits[number] = execution_id
            return number

    def unwatch(self, watch: int) -> None:
        with self.cluster.lock:
            self.cluster.waits.pop(watch, None)

    # ---- sessions

    def put_session(self, row: SessionRow) -> None:
        with self.cluster.lock:
            self.cluster.sessions.setdefault(row.session_id, row)

    def sessions(self, ids: list[str]) -> list[SessionRow]:
        with self.cluster.lock:
            return [self.cluster.sessions[i] for i in ids if i in self.cluster.sessions]

    def sessions_seen_since(self, since_ms: int) -> list[SessionRow]:
        with self.cluster.lock:
            return [r for r in self.cluster.sessions.values() if r.last_seen_ms >= since_ms]

    def touch_sessions(self, seen: dict[str, int]) -> None:
        with self.cluster.lock:
            for session_id, at_ms in seen.items():
                row = self.cluster.sessions.get(session_id)
                if row is not None and at_ms > row.last_seen_ms:
                    self.cluster.sessions[session_id] = attrs.evolve(row, last_seen_ms=at_ms)

    def drop_session(self, session_id: str) -> None:
        with self.cluster.lock:
            self.cluster.sessions.pop(session_id, None)

    def post_cancels(self, cancels: dict[str, list[str]]) -> None:
        with self.cluster.lock:
            for session_id, tokens in cancels.items():
                self.cluster.cancels.setdefault(session_id, []).extend(tokens)

    def take_cancels(self, session_id: str) -> list[str]:
        with self.cluster.lock:
            return self.cluster.cancels.pop(session_id, [])

    # ---- announcements (a single-threaded simulation never waits)

    def serial(self, channel: str) -> int:
        return self.cluster.serials[channel]

    def wait(self, channel: str, seen: int, timeout: float) -> int:
        return self.cluster.serials[channel]


def _place(cluster: MemoryCluster, offer: TaskOffer) -> float:
    """The offer's virtual time (orbit_store/shared.py, "The board's order"):
    the clock's for a task without a fairness key, else 1/weight after the
    later of the clock and the key's previous task."""
    now = cluster.board_clock.get(offer.task, 0.0)
    if offer.fair_key is None:
        return now
    vt = max(now, cluster.key_times.get(offer.fair_key, 0.0)) + 1.0 / max(1, offer.weight)
    cluster.key_times[offer.fair_key] = vt
    return vt


def _holder(slot: StepSlot) -> tuple[str, str, int, int]:
    return (slot.execution_id, slot.unit_key, slot.run, slot.offer_seq)


def _free_waits(cluster: MemoryCluster, waits: list[StepSlot]) -> None:
    """Deletes these waiting rows, each only while it is still that offer's."""
    for wait in waits:
        unit = (wait.execution_id, wait.unit_key)
        found = cluster.step_waits.get(unit)
        if found is not None and _holder(found[0]) == _holder(wait):
            del cluster.step_waits[unit]
