"""The coordination ports of servers that share executions (chapter 44's
shared mode): what a shared engine (orbit_core/engine/shared.py) needs
from the others besides the store, named after what each means. The
database adapters live in orbit_store; none of this module knows one.

- `Ownership`: which server owns a running execution now (the store's
  commits are fenced on it: a server that lost an execution cannot write
  to it), and the flow gates of workflows with start limits, held the same
  way (engine/flow_gates.py).
- `TaskBoard`: the tasks offered to every server (`TaskOffer`s of the
  groups), claimed for waiting polls, one claim per task.
- `Mailbox`: messages to an execution's owner (a result, a signal, a
  cancellation, a dispatch recorded elsewhere) and the owner's replies.
- `EndWatch`: waits listed for the end of an execution owned elsewhere, so
  that its owner announces the end.
- `Sessions`: the worker sessions of every server, their contacts, and the
  attempts a session should stop (posted by an owner for the server the
  session talks to).
- `StepSlots`: the slots of step `concurrency` limits, counted in the
  store for the whole group of servers, with the one line of units waiting
  for them (engine/step_slots.py), and the buckets of step `rate` limits
  (engine/step_rate.py).
- `Announcements`: channels that wake waiters (`TASKS`, `INBOX`, `REPLIES`,
  `DONE`): a waiter remembers a channel's serial and waits for it to move.
  Missing one is harmless: every waiter also looks again on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import attrs

from orbit_core.ports import StepSlot, StepWait

# The announcement channels.
TASKS, INBOX, REPLIES, DONE = "orbit_tasks", "orbit_inbox", "orbit_replies", "orbit_done"


def rendezvous(root_id: str, nodes: Iterable[str]) -> str:
    """The node a root execution goes to among `nodes` (highest hash wins):
    every server computes the same answer without talking to the others."""
    return max(nodes, key=lambda n: hashlib.sha256(f"{n}\0{root_id}".encode()).digest())


@attrs.frozen(slots=True)
class Claim:
    """A task claimed from the board for a session: `owner` is the node that
    owns its execution."""

    execution_id: str
    unit_key: str
    offer_seq: int
    token: str
    timeout_ms: int | None
    assignment: dict[str, Any]
    owner: str


# Inbox kinds whose sender waits for the owner's reply (a worker's result is
# answered with what the owner decided, as on a single server; `describe` is
# a read of the owner's document). The stores keep their replies.
REPLIED = frozenset(
    {
        "signal",
        "cancel",
        "pause",
        "resume",
        "restart",
        "migrate",
        "complete",
        "fail",
        "start",
        "describe",
    }
)


@attrs.frozen(slots=True)
class InboxEntry:
    """A message to an execution's owner; `seq` orders one execution's."""

    seq: int
    execution_id: str
    kind: str
    payload: Any
    sender: str


@attrs.frozen(slots=True)
class SessionRow:
    """A worker session as every server sees it."""

    session_id: str
    worker_id: str
    runtime: str
    contracts: list[tuple[str, str]]
    sdk: str | None
    registered_ms: int
    last_seen_ms: int


class Ownership(Protocol):
    def owner(self, execution_id: str) -> tuple[str, int] | None:
        """(node id, epoch) of the execution's owner; None once it ended."""
        ...

    def reserve_gate(self, gate: str) -> tuple[str, int]:
        """Takes a flow gate for this node unless a node holds it already;
        (node id, epoch) of its holder either way. The caller records a
        gate it got in its store, like an execution it adopts."""
        ...


class TaskBoard(Protocol):
    def claim_for(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        sessions: list[tuple[str, str]],
        token: Callable[[str], str],
        keep: Callable[[int], bool] | None = None,
    ) -> list[Claim]:
        """Claims offered tasks these sessions (id, worker id) can take, at
        most one each, this node's first; the i-th claim is the i-th
        session's. `keep(i)` is asked before a task goes to session i."""
        ...

    def unclaim(self, token: str) -> None:
        """Offers a claimed task again (its poll could not take it)."""
        ...

    def drop_claim(self, token: str) -> None:
        """Forgets a claimed task nobody wants any more."""
        ...


class Mailbox(Protocol):
    def put(self, execution_id: str, kind: str, payload: Any) -> int:
        """Sends a message to the execution's owner; returns its seq."""
        ...

    def reply(self, seq: int) -> tuple[bool, Any]:
        """(applied, reply) of a message waited for; a read reply is gone."""
        ...

    def withdraw(self, seq: int) -> bool:
        """Takes back a message nobody applied yet; False once applied."""
        ...


class EndWatch(Protocol):
    def watch(self, execution_id: str) -> int:
        """Lists a wait for the end of an execution owned elsewhere, so that
        its owner announces the end on `DONE`; returns what `unwatch` takes."""
        ...

    def unwatch(self, watch: int) -> None: ...


class Sessions(Protocol):
    def put_session(self, row: SessionRow) -> None: ...

    def sessions(self, ids: list[str]) -> list[SessionRow]: ...

    def sessions_seen_since(self, since_ms: int) -> list[SessionRow]: ...

    def drop_session(self, session_id: str) -> None: ...

    def post_cancels(self, cancels: dict[str, list[str]]) -> None:
        """Attempts each session should stop, for whichever server it talks to."""
        ...

    def take_cancels(self, session_id: str) -> list[str]:
        """The attempts posted for the session, each returned once."""
        ...


class StepSlots(Protocol):
    def take_step_slot(self, slot: StepSlot, limit: int, priority: int, since_ms: int) -> bool:
        """Takes `slot` in a short transaction of its own, serialized with
        every other take of its scope (`flow`, `key`), when fewer than
        `limit` slots of the scope are held and no waiting row of another
        unit of the scope is ahead of this one (`waits_ahead`); True when
        the slot is held (also when this holder held it already), and the
        holder's waiting row is gone. Refused, the holder's waiting row is
        written (or replaced) with `priority` and `since_ms`, in the same
        transaction."""
        ...

    def step_waits_of(self, execution_ids: list[str]) -> list[StepWait]:
        """The waiting rows the store holds for these executions."""
        ...

    def free_step_waits(self, waits: list[StepSlot]) -> None:
        """Deletes waiting rows outside any group (reconciliation)."""
        ...

    def step_slots_of(self, execution_ids: list[str]) -> list[StepSlot]:
        """The slots the store holds for these executions."""
        ...

    def free_step_slots(self, slots: list[StepSlot]) -> None:
        """Deletes slots outside any group (reconciliation by an owner), but
        never those of an execution another node owns: a server judges the
        rows from its memory, and a copy of an execution it lost (read back
        by an undone group) would find the new owner's attempts stale."""
        ...

    def sweep_step_rows(self) -> int:
        """Deletes the slot and waiting rows of executions that have ended,
        whoever wrote them; how many went. An end frees its execution's rows
        in its commit, but only those its server knew of: a row taken by a
        server that then lost the execution, or adopted and forgotten before
        its owner's reconciliation, would hold its scope for good (issue 40,
        shared simulation seeds 663376, 744308 and others). Each server's
        round calls it."""
        ...

    def take_step_token(
        self, flow: str, key: str, take: Callable[[int], int | None]
    ) -> tuple[bool, int]:
        """Takes a token of a step's `rate` from the bucket the store keeps
        for (`flow`, `key`), in a short transaction of its own holding the
        bucket's row: `take(tat)` is the bucket's new time when it has a
        token, else None. (taken, the bucket's time after)."""
        ...


def waits_ahead(other: tuple[int, int, str, str], mine: tuple[int, int, str, str]) -> bool:
    """Whether a waiting row comes before another in a step's line: each is
    (priority, since_ms, execution id, unit key); higher priority first,
    then the earlier, then by execution id and unit key (compared as code
    points: the store compares them with the "C" collation)."""
    return (-other[0], other[1], other[2], other[3]) < (-mine[0], mine[1], mine[2], mine[3])


class Announcements(Protocol):
    def serial(self, channel: str) -> int: ...

    def wait(self, channel: str, seen: int, timeout: float) -> int:
        """Blocks until `channel`'s serial moved past `seen`, or `timeout` s."""
        ...


class Tables(Ownership, TaskBoard, Mailbox, EndWatch, Sessions, StepSlots, Protocol):
    """The request-path coordination one adapter object serves."""
