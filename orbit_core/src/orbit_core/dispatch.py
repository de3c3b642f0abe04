"""Task dispatch bookkeeping: the index of queued tasks and worker sessions.

The index maps (task name, contract version) to one FIFO per routing runtime
(`None` for steps without `using`, or with `using any`); a session whose
runtime is `EVERY_RUNTIME` takes from every queue of its contracts. Entries are checked
lazily when they reach the head of their queue: an entry is valid only while
its unit is still SCHEDULED under the same offer (`StepScheduled` seq), so
withdrawing, resolving or rolling back a unit never has to search the index.
A poll therefore costs O(1) amortised, however many executions are in flight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

import attrs

RUNTIME_ANY = None
# The runtime of a session that serves its contracts whatever the step's
# `using` (in-process handlers registered without a runtime).
EVERY_RUNTIME = "*"


def routing_runtime(using: str | None) -> str | None:
    if using is None or using.lower() == "any":
        return RUNTIME_ANY
    return using.lower()


@attrs.define(slots=True, eq=False)
class QueuedTask:
    serial: int
    execution_id: str
    unit_key: str
    offer_seq: int
    # A task step's flow control (docs/language/flow-control.md): its
    # `priority`, and its `fairness` key and weight (None: not declared).
    priority: int = 0
    fair_key: str | None = None
    weight: int = 1


@attrs.define(slots=True, eq=False)
class _Fair:
    """The tasks of one fairness key in a band, and the turns it has left."""

    tasks: deque[QueuedTask] = attrs.field(factory=deque)
    weight: int = 1
    turns: int = 1


class _Band:
    """The tasks of one priority in a lane: those without a fairness key in
    one FIFO, those with one in a weighted round robin of keys (each key
    `weight` tasks a turn, in the order the keys arrived). The FIFO takes
    part in the rotation as one more key."""

    __slots__ = ("keys", "rotation")

    def __init__(self) -> None:
        self.keys: dict[str | None, _Fair] = {}
        self.rotation: deque[str | None] = deque()

    def push(self, task: QueuedTask) -> None:
        fair = self.keys.get(task.fair_key)
        if fair is None:
            weight = max(1, task.weight)
            fair = self.keys[task.fair_key] = _Fair(weight=weight, turns=weight)
            self.rotation.append(task.fair_key)
        else:
            fair.weight = max(1, task.weight)
        fair.tasks.append(task)

    def head(self, valid: Callable[[QueuedTask], bool]) -> QueuedTask | None:
        """The task whose turn it is; invalid ones met on the way are dropped."""
        while self.rotation:
            key = self.rotation[0]
            fair = self.keys[key]
            while fair.tasks and not valid(fair.tasks[0]):
                fair.tasks.popleft()
            if fair.tasks:
                return fair.tasks[0]
            self.rotation.popleft()
            del self.keys[key]
        return None

    def pop(self) -> QueuedTask:
        """Takes the head (`head` found it valid) and moves the turn on."""
        key = self.rotation[0]
        fair = self.keys[key]
        task = fair.tasks.popleft()
        fair.turns -= 1
        if not fair.tasks:
            self.rotation.popleft()
            del self.keys[key]
        elif fair.turns <= 0:
            fair.turns = fair.weight
            self.rotation.rotate(-1)
        return task

    def __iter__(self) -> Iterator[deque[QueuedTask]]:
        return (fair.tasks for fair in self.keys.values())


class _Lane:
    """The queue of one contract and runtime. Tasks without flow control go
    to `plain`, a FIFO (the common case, O(1)); tasks with a priority or a
    fairness key to the band of their priority, higher bands first. Tasks of
    priority 0 without a fairness key stay in `plain`, which ranks as
    priority 0 and yields to a band of priority 0 only by age."""

    __slots__ = ("bands", "plain")

    def __init__(self) -> None:
        self.plain: deque[QueuedTask] = deque()
        self.bands: dict[int, _Band] = {}

    def push(self, task: QueuedTask) -> None:
        if task.priority == 0 and task.fair_key is None:
            self.plain.append(task)
            return
        band = self.bands.get(task.priority)
        if band is None:
            band = self.bands[task.priority] = _Band()
        band.push(task)

    def head(self, valid: Callable[[QueuedTask], bool]) -> QueuedTask | None:
        """The task this lane hands out next, or None."""
        plain = self.plain
        while plain and not valid(plain[0]):
            plain.popleft()
        first = plain[0] if plain else None
        if not self.bands:
            return first  # (the common case: no flow control, nothing to sort)
        for priority in sorted(self.bands, reverse=True):
            head = self.bands[priority].head(valid)
            if head is None:
                del self.bands[priority]
                continue
            # The highest band with a task against the FIFO (priority 0).
            if first is None or (-head.priority, head.serial) < (-first.priority, first.serial):
                return head
            return first
        return first

    def pop(self, task: QueuedTask) -> None:
        """Takes `task`, which `head` returned."""
        if self.plain and self.plain[0] is task:
            self.plain.popleft()
        else:
            self.bands[task.priority].pop()

    def queues(self) -> Iterator[deque[QueuedTask]]:
        yield self.plain
        for band in self.bands.values():
            yield from band

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues())


class TaskIndex:
    def __init__(self) -> None:
        self._queues: dict[tuple[str, str], dict[str | None, _Lane]] = {}
        # The serial of the newest entry ever pushed (read by other threads:
        # `Executions.nothing_stale`).
        self.pushed = 0

    def push(
        self,
        contract: tuple[str, str],
        using: str | None,
        execution_id: str,
        key: str,
        offer: int,
        *,
        priority: int = 0,
        fair_key: str | None = None,
        weight: int = 1,
    ) -> None:
        by_runtime = self._queues.get(contract)
        if by_runtime is None:
            by_runtime = self._queues[contract] = {}
        runtime = routing_runtime(using)
        lane = by_runtime.get(runtime)
        if lane is None:
            lane = by_runtime[runtime] = _Lane()
        self.pushed += 1
        lane.push(QueuedTask(self.pushed, execution_id, key, offer, priority, fair_key, weight))

    def pop(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        valid: Callable[[QueuedTask], bool],
    ) -> QueuedTask | None:
        """The next valid task among the session's contracts (higher
        priority, then its fairness turn, then the oldest); invalid heads
        met on the way are dropped."""
        found = self._best(contracts, runtime, valid)
        if found is None:
            return None
        lane, task = found
        lane.pop(task)
        return task

    def has(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        valid: Callable[[QueuedTask], bool],
    ) -> bool:
        """Whether `pop` would return a task."""
        return self._best(contracts, runtime, valid) is not None

    def _best(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        valid: Callable[[QueuedTask], bool],
    ) -> tuple[_Lane, QueuedTask] | None:
        best: tuple[_Lane, QueuedTask] | None = None
        for contract in contracts:
            by_runtime = self._queues.get(contract)
            if not by_runtime:
                continue
            lanes: Iterable[_Lane | None] = (
                by_runtime.values()
                if runtime == EVERY_RUNTIME
                else (by_runtime.get(RUNTIME_ANY), by_runtime.get(runtime))
            )
            for lane in lanes:
                if lane is None:
                    continue
                head = lane.head(valid)
                if head is None:
                    continue
                if best is None or (-head.priority, head.serial) < (
                    -best[1].priority,
                    best[1].serial,
                ):
                    best = (lane, head)
        return best

    def __len__(self) -> int:
        return sum(len(lane) for by in self._queues.values() for lane in by.values())

    def newest(self) -> int:
        """The serial of the newest entry still queued (0: none)."""
        return max(
            (
                q[-1].serial
                for by in self._queues.values()
                for lane in by.values()
                for q in lane.queues()
                if q
            ),
            default=0,
        )

    def take_until(self, serial: int, valid: Callable[[QueuedTask], bool]) -> list[QueuedTask]:
        """Removes and returns the valid entries queued up to `serial` (each
        queue is in serial order, so they are its heads); invalid ones met
        on the way are dropped."""
        taken = []
        for by_runtime in self._queues.values():
            for lane in by_runtime.values():
                for queue in lane.queues():
                    while queue and queue[0].serial <= serial:
                        head = queue.popleft()
                        if valid(head):
                            taken.append(head)
                lane.bands = {
                    p: band for p, band in lane.bands.items() if any(queue for queue in band)
                }
                for band in lane.bands.values():
                    for key in [k for k, f in band.keys.items() if not f.tasks]:
                        del band.keys[key]
                        band.rotation.remove(key)
        return taken


@attrs.define(slots=True, eq=False)
class Session:
    session_id: str
    worker_id: str
    runtime: str
    contracts: tuple[tuple[str, str], ...]
    sdk: str | None
    registered_at_ms: int
    last_seen_ms: int
    held: set[str] = attrs.field(factory=set)
    cancel_sent: set[str] = attrs.field(factory=set)
    lost: bool = False
    local: bool = False
