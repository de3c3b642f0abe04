"""Task results: successes and failures reported for an attempt's token,
reconciled against its unit (stale and duplicate results are recorded and
ignored).

A success counts for any token of an unresolved unit (the work happened),
except a token whose attempt already has its answer: it failed while it was
that token's, by a reported failure or a refused output, not by its deadline
(`Unit.answered`). A token reports once; its later success is answered as a
failure from an attempt no longer in flight is ("stale attempt", recorded as
StaleResultIgnored with outcome `failure`), since the step is not resolved."""

from __future__ import annotations

from orbit_core import events as ev
from orbit_core import limits
from orbit_core import values as _values
from orbit_core.api import (
    UNIT_DISPATCHED,
    Accepted,
)
from orbit_core.engine.commands import Tx
from orbit_core.engine.executions import Executions
from orbit_core.engine.live import Live
from orbit_core.engine.running import Attempt
from orbit_core.engine.workers import Workers
from orbit_core.errors import InvalidError
from orbit_core.jsontypes import JsonValue

_UNKNOWN_TOKEN: Accepted = {
    "accepted": False,
    "reason": "unknown token (execution finished or token invalid)",
}


def admit_success(token: str, output: JsonValue) -> None:
    """The checks a success passes before any command, wherever its
    execution runs (a server forwarding it to another makes them too)."""
    if not token:
        raise InvalidError("token is required", "INVALID_REQUEST")
    limits.admit(output, "task output", "INVALID_REQUEST")


def admit_failure(
    token: str, error_code: str, error_message: str, retryable: bool, details: JsonValue
) -> ev.ErrorJson:
    """The checks a failure passes before any command; the error it records."""
    if not token:
        raise InvalidError("token is required", "INVALID_REQUEST")
    if not error_code:
        raise InvalidError("error_code is required", "INVALID_REQUEST")
    limits.admit(
        details,
        "`details`",
        "INVALID_REQUEST",
        error_code=error_code,
        error_message=error_message,
    )
    return ev.make_error(error_code, error_message, retryable, details)


class Results:
    def __init__(self, executions: Executions, workers: Workers) -> None:
        self._x = executions
        self._workers = workers

    def complete(
        self, tx: Tx, token: str, output: JsonValue, worker: str | None = None
    ) -> Accepted:
        resolved = self._resolve(tx, token, worker)
        if resolved is None:
            return _UNKNOWN_TOKEN.copy()
        _, live, key, attempt = resolved
        state = live.state
        unit = state.units[key]
        if unit.done:
            self._stale(tx, live, key, token, "duplicate")
            return {"accepted": False, "reason": "duplicate result; step already resolved"}
        if unit.answered is not None and token in unit.answered:
            self._stale(tx, live, key, token, "failure")
            return {"accepted": False, "reason": "stale attempt"}
        output = {} if output is None else output
        live.limits.check_payload("task result", output)
        spec = live.plan.spec(key)
        contract = live.plan.contract(spec.task or "") if spec is not None else None
        if contract is not None:
            try:
                output = _values.conform(output, contract.output)
            except _values.ValidationError as exc:
                error = ev.make_error(
                    "OUTPUT_CONTRACT_VIOLATION",
                    f"worker output for `{spec.task if spec else ''}` does not match its "
                    f"contract at {exc}",
                    False,
                )
                if unit.status == UNIT_DISPATCHED and unit.token == token:
                    self._x.record(tx, live, ev.StepAttemptFailed, key, attempt, error)
                    self._x.decide(tx, live)
                else:
                    self._stale(tx, live, key, token, "failure")
                return {"accepted": False, "reason": "output violates the task contract"}
        self._x.record(tx, live, ev.StepSucceeded, key, attempt, output)
        self._x.decide(tx, live)
        return {"accepted": True}

    def fail(self, tx: Tx, token: str, error: ev.ErrorJson, worker: str | None = None) -> Accepted:
        resolved = self._resolve(tx, token, worker)
        if resolved is None:
            return _UNKNOWN_TOKEN.copy()
        _, live, key, attempt = resolved
        unit = live.state.units[key]
        if unit.done:
            self._stale(tx, live, key, token, "duplicate")
            return {"accepted": False, "reason": "duplicate result; step already resolved"}
        if unit.status != UNIT_DISPATCHED or unit.token != token:
            self._stale(tx, live, key, token, "failure")
            return {"accepted": False, "reason": "stale attempt"}
        self._x.record(tx, live, ev.StepAttemptFailed, key, attempt, error)
        self._x.decide(tx, live)
        return {"accepted": True}

    def _resolve(self, tx: Tx, token: str, worker: str | None) -> Attempt | None:
        """The attempt a token names, while its execution runs; a worker
        bound to an id may only report the tokens issued to that id."""
        attempt = self._x.memory.attempt(token)
        if attempt is None:
            lost = self._x.lost_token(token)
            if lost is not None:
                # Not unknown: its execution waits to be read back from the
                # database; the worker reports again (at least once).
                raise self._x.not_loaded(lost)
            return None
        if attempt.live.state.terminal:
            return None
        if worker is not None:
            self._workers.check_issued(token, worker)
        self._workers.reported(tx, token)
        return attempt

    def _stale(self, tx: Tx, live: Live, key: str, token: str, outcome: str) -> None:
        self._x.record(tx, live, ev.StaleResultIgnored, key, token, outcome)
