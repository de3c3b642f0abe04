"""The operator's calls on executions (docs/operating-executions.md,
docs/restart-and-fork.md): pause, resume, restart and fork, reached as
`engine.operations`, so this audience's calls do
not crowd the embedding façade (`Engine`), as the worker calls are
`engine.workers`'. Each call is one command of a group, like `cancel`."""

from __future__ import annotations

from typing import Protocol

from orbit_core import limits
from orbit_core.api import ActionAnswer, ExecutionDoc
from orbit_core.engine.control import Control
from orbit_core.engine.pipeline import GroupCommit
from orbit_core.engine.restarts import DEFAULT_RESTART_REASON, Restarts


class OperatorApi(Protocol):
    """What `engine.operations` offers (a shared-mode server's forwards a
    call to the execution's owner)."""

    def pause(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        """Holds a running execution: no attempt, child or timer until resumed."""
        ...

    def resume(self, execution_id: str) -> ExecutionDoc:
        """Lets a paused execution go on."""
        ...

    def restart(
        self,
        execution_id: str,
        step: str,
        *,
        dry_run: bool = False,
        force: bool = False,
        reason: str | None = None,
    ) -> ActionAnswer:
        """Starts a new run of the execution from `step`; with `dry_run`,
        only its plan and the effects it would repeat."""
        ...

    def fork(
        self,
        execution_id: str,
        step: str,
        *,
        new_id: str | None = None,
        version: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> ActionAnswer:
        """Starts a new execution with the outcomes of the steps before
        `step`; with `dry_run`, only its plan."""
        ...


class Operations:
    """`OperatorApi` over one engine's group commit."""

    def __init__(self, pipeline: GroupCommit, control: Control, restarts: Restarts) -> None:
        self._pipeline = pipeline
        self._control = control
        self._restarts = restarts

    def pause(self, execution_id: str, reason: str | None = None) -> ExecutionDoc:
        limits.admit_strings("INVALID_REQUEST", reason=reason)
        return self._pipeline.submit(lambda tx: self._control.pause(tx, execution_id, reason))

    def resume(self, execution_id: str) -> ExecutionDoc:
        return self._pipeline.submit(lambda tx: self._control.resume(tx, execution_id))

    def restart(
        self,
        execution_id: str,
        step: str,
        *,
        dry_run: bool = False,
        force: bool = False,
        reason: str | None = None,
    ) -> ActionAnswer:
        limits.admit_strings("INVALID_REQUEST", reason=reason, step=step)
        return self._pipeline.submit(
            lambda tx: self._restarts.restart(
                tx,
                execution_id,
                step,
                dry_run=dry_run,
                force=force,
                reason=reason or DEFAULT_RESTART_REASON,
            )
        )

    def fork(
        self,
        execution_id: str,
        step: str,
        *,
        new_id: str | None = None,
        version: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> ActionAnswer:
        limits.admit_strings("INVALID_REQUEST", step=step, version=version)
        return self._pipeline.submit(
            lambda tx: self._restarts.fork(
                tx,
                execution_id,
                step,
                new_id=new_id,
                version=version,
                dry_run=dry_run,
                force=force,
            )
        )
