"""The operator's calls on running executions (docs/operating-executions.md):
pause and resume, reached as `engine.operations`, so this audience's calls do
not crowd the embedding façade (`Engine`), as the worker calls are
`engine.workers`'. Each call is one command of a group, like `cancel`."""

from __future__ import annotations

from typing import Protocol

from orbit_core import limits
from orbit_core.api import ExecutionDoc
from orbit_core.engine.control import Control
from orbit_core.engine.pipeline import GroupCommit


class OperatorApi(Protocol):
    """What `engine.operations` offers (a shared-mode server's forwards a
    call to the execution's owner)."""

    def pause(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        """Holds a running execution: no attempt, child or timer until resumed."""
        ...

    def resume(self, execution_id: str) -> ExecutionDoc:
        """Lets a paused execution go on."""
        ...


class Operations:
    """`OperatorApi` over one engine's group commit."""

    def __init__(self, pipeline: GroupCommit, control: Control) -> None:
        self._pipeline = pipeline
        self._control = control

    def pause(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        limits.admit_strings("INVALID_REQUEST", reason=reason)
        return self._pipeline.submit(lambda tx: self._control.pause(tx, execution_id, reason))

    def resume(self, execution_id: str) -> ExecutionDoc:
        return self._pipeline.submit(lambda tx: self._control.resume(tx, execution_id))
