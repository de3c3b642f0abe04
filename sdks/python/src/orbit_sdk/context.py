"""What a handler knows about the attempt it runs."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from orbit_sdk._json import json_string as _json_string
from orbit_sdk._log import _encode_fields, log_fields

_MAKING_EVENT = threading.Lock()


class Context:
    """The second argument of every handler; created by the SDK.

    cancelled is set when a heartbeat answer lists this attempt. The SDK never
    interrupts a handler and does not act on deadline_ms itself: check
    is_cancelled between units of work and bound calls with remaining_ms().
    """

    __slots__ = (
        "_cancelled",
        "attempt",
        "deadline_ms",
        "execution_id",
        "idempotency_key",
        "redelivery",
        "step_id",
        "task_name",
        "token",
        "workflow",
        "workflow_version",
    )

    def __init__(
        self,
        *,
        token: str,
        execution_id: str,
        workflow: str,
        workflow_version: str,
        step_id: str,
        task_name: str,
        attempt: int,
        idempotency_key: str,
        redelivery: bool,
        deadline_ms: int | None,
    ) -> None:
        self.token = token
        self.execution_id = execution_id
        self.workflow = workflow
        self.workflow_version = workflow_version
        self.step_id = step_id
        self.task_name = task_name
        self.attempt = attempt
        self.idempotency_key = idempotency_key
        self.redelivery = redelivery
        self.deadline_ms = deadline_ms
        # Made on first use: most attempts are never asked about, and an
        # Event (a Condition and its locks) is a fair part of a step's cost.
        self._cancelled: threading.Event | None = None

    @classmethod
    def _from_assignment(cls, task: dict[str, Any]) -> Context:
        # What __init__ does, without a call of ten keyword arguments: one
        # context is made per task.
        ctx = cls.__new__(cls)
        get = task.get
        deadline = get("deadline_ms")
        ctx.token = str(task["token"])
        ctx.execution_id = str(get("execution_id", ""))
        ctx.workflow = str(get("workflow", ""))
        ctx.workflow_version = str(get("workflow_version", ""))
        ctx.step_id = str(get("step_id", ""))
        ctx.task_name = str(get("task_name", ""))
        ctx.attempt = int(get("attempt", 1))
        ctx.idempotency_key = str(get("idempotency_key", ""))
        ctx.redelivery = bool(get("redelivery", False))
        ctx.deadline_ms = None if deadline is None else int(deadline)
        ctx._cancelled = None
        return ctx

    @property
    def cancelled(self) -> threading.Event:
        """Set when the runtime asked for this attempt to be cancelled."""
        event = self._cancelled
        if event is None:
            # The handler's thread and the heartbeat's may both come first.
            with _MAKING_EVENT:
                event = self._cancelled
                if event is None:
                    event = self._cancelled = threading.Event()
        return event

    @property
    def is_cancelled(self) -> bool:
        event = self._cancelled
        return event is not None and event.is_set()

    def remaining_ms(self) -> int | None:
        """Milliseconds until deadline_ms (never negative), or None without one."""
        if self.deadline_ms is None:
            return None
        return max(0, self.deadline_ms - int(time.time() * 1000))

    def log(self, message: str, /, **fields: Any) -> None:
        """Logs message at INFO, followed by the attempt and fields as JSON."""
        log_fields(logging.INFO, message, {**self._identity(), **fields})

    def _identity(self) -> dict[str, Any]:
        """The fields that name this attempt in every log line."""
        return {"execution_id": self.execution_id, "step": self.step_id, "attempt": self.attempt}

    def _executing_json(self) -> str:
        """The fields of the `executing` line, as log_fields would encode
        {**_identity(), "task": task_name, "redelivery": redelivery}, written
        out directly: that line is logged for every task."""
        execution_id, step_id, task_name = self.execution_id, self.step_id, self.task_name
        if (
            type(execution_id) is not str
            or type(step_id) is not str
            or type(task_name) is not str
            or type(self.attempt) is not int
            or type(self.redelivery) is not bool
        ):
            return _encode_fields(
                {**self._identity(), "task": task_name, "redelivery": self.redelivery}
            )
        return (
            f'{{"execution_id": {_json_string(execution_id)}, "step": {_json_string(step_id)}, '
            f'"attempt": {self.attempt}, "task": {_json_string(task_name)}, '
            f'"redelivery": {"true" if self.redelivery else "false"}}}'
        )

    def __repr__(self) -> str:
        return (
            f"Context(execution_id={self.execution_id!r}, step_id={self.step_id!r}, "
            f"attempt={self.attempt}, task_name={self.task_name!r})"
        )
