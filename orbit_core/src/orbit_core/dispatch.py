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
from collections.abc import Callable, Iterable

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


class TaskIndex:
    def __init__(self) -> None:
        self._queues: dict[tuple[str, str], dict[str | None, deque[QueuedTask]]] = {}
        # The serial of the newest entry ever pushed (read by other threads:
        # `Executions.nothing_stale`).
        self.pushed = 0

    def push(
        self, contract: tuple[str, str], using: str | None, execution_id: str, key: str, offer: int
    ) -> None:
        by_runtime = self._queues.setdefault(contract, {})
        queue = by_runtime.get(routing_runtime(using))
        if queue is None:
            queue = by_runtime[routing_runtime(using)] = deque()
        self.pushed += 1
        queue.append(QueuedTask(self.pushed, execution_id, key, offer))

    def pop(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        valid: Callable[[QueuedTask], bool],
    ) -> QueuedTask | None:
        """The oldest valid task among the session's contracts; invalid heads
        met on the way are dropped."""
        best = self._oldest(contracts, runtime, valid)
        return best.popleft() if best is not None else None

    def has(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        valid: Callable[[QueuedTask], bool],
    ) -> bool:
        """Whether `pop` would return a task."""
        return self._oldest(contracts, runtime, valid) is not None

    def _oldest(
        self,
        contracts: Iterable[tuple[str, str]],
        runtime: str,
        valid: Callable[[QueuedTask], bool],
    ) -> deque[QueuedTask] | None:
        best: deque[QueuedTask] | None = None
        best_serial = 0
        for contract in contracts:
            by_runtime = self._queues.get(contract)
            if not by_runtime:
                continue
            queues: Iterable[deque[QueuedTask] | None] = (
                by_runtime.values()
                if runtime == EVERY_RUNTIME
                else (by_runtime.get(RUNTIME_ANY), by_runtime.get(runtime))
            )
            for queue in queues:
                while queue:
                    head = queue[0]
                    if valid(head):
                        if best is None or head.serial < best_serial:
                            best, best_serial = queue, head.serial
                        break
                    queue.popleft()
        return best

    def __len__(self) -> int:
        return sum(len(q) for by in self._queues.values() for q in by.values())

    def newest(self) -> int:
        """The serial of the newest entry still queued (0: none)."""
        return max(
            (q[-1].serial for by in self._queues.values() for q in by.values() if q), default=0
        )

    def take_until(self, serial: int, valid: Callable[[QueuedTask], bool]) -> list[QueuedTask]:
        """Removes and returns the valid entries queued up to `serial` (each
        queue is in serial order, so they are its heads); invalid ones met
        on the way are dropped."""
        taken = []
        for by_runtime in self._queues.values():
            for queue in by_runtime.values():
                while queue and queue[0].serial <= serial:
                    head = queue.popleft()
                    if valid(head):
                        taken.append(head)
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
