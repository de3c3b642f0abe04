"""A definition prepared for the engine: steps by name, dependencies, and the
policy of every unit key (which task it runs, with which timeouts and retries).
Built once per deployed definition and shared by every execution of it.
"""

from __future__ import annotations

import attrs

from orbit_core import unitkeys
from orbit_core.ir import ChildContract, Definition, Retry, Step, TaskContract
from orbit_core.ir.walk import all_steps
from orbit_core.visibility.fields import search_plan

NO_RETRY = Retry()
BUILTIN_PREFIX = "orbit."


@attrs.frozen
class UnitSpec:
    """What one unit does. `step` is the declaring step (for a compensation:
    the compensated step); `element` is the fan-out index or None."""

    kind: str
    step: Step
    task: str | None
    contract_version: str | None
    using: str | None
    timeout_ms: int | None
    queue_timeout_ms: int | None
    retry: Retry
    is_child: bool
    element: int | None = None

    @property
    def is_builtin(self) -> bool:
        return self.task is not None and self.task.startswith(BUILTIN_PREFIX)


class Plan:
    """Lookup tables over one definition."""

    def __init__(self, defn: Definition) -> None:
        self.defn = defn
        self.steps: dict[str, Step] = {s.name: s for s in defn.steps}
        self.handlers: dict[str, tuple[Step, ...]] = dict(defn.handlers)
        self.events: dict[str, tuple[Step, ...]] = {h.signal: h.steps for h in defn.events}
        self.block_deps: dict[tuple[str, str], tuple[str, ...]] = {}
        for kind, steps in self.handlers.items():
            names = {s.name for s in steps}
            for s in steps:
                self.block_deps[(kind, s.name)] = tuple(d for d in s.depends_on if d in names)
        for signal, steps in self.events.items():
            names = {s.name for s in steps}
            for s in steps:
                self.block_deps[("event:" + signal, s.name)] = tuple(
                    d for d in s.depends_on if d in names
                )
        self.compensated = frozenset(s.name for s in defn.steps if s.compensate is not None)
        self._specs: dict[str, UnitSpec | None] = {}
        self.limits: dict[str, int] = dict(defn.limits)
        self.search = search_plan(defn)
        self._step_specs: dict[str, UnitSpec] = {}
        # Whether anything in the definition ever falls due by time alone.
        self.timed = defn.timeout_ms is not None or any(
            s.timeout_ms is not None
            or s.queue_timeout_ms is not None
            or s.retry is not None
            or s.kind in ("sleep", "await", "workflow")
            or (
                s.compensate is not None
                and (
                    s.compensate.timeout_ms is not None
                    or s.compensate.queue_timeout_ms is not None
                    or s.compensate.retry is not None
                )
            )
            for s in all_steps(defn)
        )

    def contract(self, task: str) -> TaskContract | ChildContract | None:
        return self.defn.contracts.get(task)

    def spec(self, key: str) -> UnitSpec | None:
        """The policy of the unit `key`, or None for keys that run no work."""
        try:
            return self._specs[key]
        except KeyError:
            spec = self._specs[key] = self._resolve(key)
            return spec

    def _resolve(self, key: str) -> UnitSpec | None:
        base = unitkeys.compensated(key)
        if base is not None:
            name, element = unitkeys.split_element(base)
            step = self.steps.get(name)
            if step is None or step.compensate is None:
                return None
            comp = step.compensate
            contract = self.contract(comp.task)
            return UnitSpec(
                kind="task",
                step=step,
                task=comp.task,
                contract_version=contract.version if contract else None,
                using=comp.using,
                timeout_ms=comp.timeout_ms,
                queue_timeout_ms=comp.queue_timeout_ms,
                retry=comp.retry or NO_RETRY,
                is_child=False,
                element=element,
            )
        found: Step | None
        index: int | None = None
        event = unitkeys.split_event_step(key)
        handler = unitkeys.split_handler(key)
        if event is not None:
            signal, name = event
            found = next((s for s in self.events.get(signal, ()) if s.name == name), None)
        elif handler is not None:
            kind, name = handler
            found = next((s for s in self.handlers.get(kind, ()) if s.name == name), None)
        else:
            name, index = unitkeys.split_element(key)
            found = self.steps.get(name)
        if found is None:
            return None
        return self.step_spec(found, index)

    def step_spec(self, step: Step, element: int | None = None) -> UnitSpec:
        if element is None:
            cached = self._step_specs.get(step.name)
            if cached is not None and cached.step is step:
                return cached
        spec = self._make_spec(step, element)
        if element is None:
            self._step_specs[step.name] = spec
        return spec

    def _make_spec(self, step: Step, element: int | None) -> UnitSpec:
        task: str | None = None
        version: str | None = None
        if step.kind == "task":
            task = step.task
        elif step.kind == "workflow":
            task = f"workflow:{step.workflow}"
        if task is not None:
            contract = self.contract(task)
            version = contract.version if contract is not None else None
        return UnitSpec(
            kind=step.kind,
            step=step,
            task=task,
            contract_version=version,
            using=step.using,
            timeout_ms=step.timeout_ms,
            queue_timeout_ms=step.queue_timeout_ms,
            retry=step.retry or NO_RETRY,
            is_child=step.kind == "workflow",
            element=element,
        )

    def tasks(self) -> list[str]:
        return sorted(self.defn.contracts)
