"""Dependency order with ties broken by source order, shared by the step graph
and the workflow call graph."""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping


def source_order(names: list[str], depends_on: Mapping[str, Collection[str]]) -> list[str]:
    """`names` with each after everything it depends on; of the names ready at
    once, the earliest in `names` comes first, and names left waiting on a
    cycle follow at the end in their `names` order. `depends_on` holds no
    duplicates and names only members of `names`."""
    position = {name: index for index, name in enumerate(names)}
    waiting = {name: len(depends_on[name]) for name in names}
    dependents: dict[str, list[str]] = {name: [] for name in names}
    for name in names:
        for target in depends_on[name]:
            dependents[target].append(name)
    ready = [position[name] for name in names if waiting[name] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = names[heapq.heappop(ready)]
        order.append(name)
        for dependent in dependents[name]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, position[dependent])
    placed = set(order)
    order.extend(name for name in names if name not in placed)
    return order
