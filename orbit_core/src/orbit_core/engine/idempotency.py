"""Idempotent starts: a start request's idempotency key names one execution
for a retention window (docs/language/flow-control.md).

A key is stored in the store (`orbit_idempotency_keys`) in the transaction
that creates its execution (`ExecutionChange.idempotency`), so a key never
names an execution that was not created, nor the reverse. Between the
moment a group records a key and the moment its commit is durable, the
key lives in `pending` so that the next groups, prepared while the first
commits, see it too; it leaves `pending` once the store has it (after the
commit) or when the group is undone (`forget`).

The conflict policy: the same key with the same workflow name, the same
input (compared by a digest of its canonical JSON) and, when the request
names one, the same execution id answers with the existing execution
(`created: false`); anything else is refused with 409
IDEMPOTENCY_KEY_REUSED. An expired key is as good as absent: the next
start with it creates a new execution and takes the key over.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import orjson

from orbit_core.engine.commands import Tx
from orbit_core.errors import ConflictError, InvalidError
from orbit_core.jsontypes import JsonValue
from orbit_core.ports import IdempotencyRow, Store

DEFAULT_RETENTION_MS = 24 * 3600 * 1000
MAX_KEY_LENGTH = 200
REUSED = "IDEMPOTENCY_KEY_REUSED"


def digest(input: JsonValue) -> str:
    """The digest of a start's input: canonical JSON (sorted keys), so two
    requests that differ only in the order of their members are the same."""
    raw = {} if input is None else input
    return hashlib.sha256(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)).hexdigest()


def check_key(key: str) -> None:
    if not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidError(
            f"idempotency_key must be 1 to {MAX_KEY_LENGTH} characters", "INVALID_INPUT"
        )


class Idempotency:
    def __init__(self, store: Store, retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        self.retention_ms = retention_ms
        self._find: Callable[[str, int], IdempotencyRow | None] = store.find_idempotency
        # Keys recorded by groups not yet durable.
        self.pending: dict[str, IdempotencyRow] = {}

    def find(self, key: str, now: int) -> IdempotencyRow | None:
        row = self.pending.get(key)
        if row is None:
            row = self._find(key, now)
        if row is None or row.expires_ms < now:
            return None
        return row

    def existing(
        self,
        tx: Tx,
        key: str,
        workflow: str,
        input: JsonValue,
        execution_id: str | None,
    ) -> str | None:
        """The execution the key already names for this same request, None
        when the key is free; raises when the key names another request."""
        check_key(key)
        row = self.find(key, tx.now)
        if row is None:
            return None
        if (
            row.workflow == workflow
            and row.input_digest == digest(input)
            and execution_id in (None, row.execution_id)
        ):
            return row.execution_id
        raise ConflictError(
            f"idempotency key `{key}` was used for execution `{row.execution_id}` "
            "with a different workflow, input or execution id",
            REUSED,
            details={"execution_id": row.execution_id},
        )

    def record(self, tx: Tx, key: str, execution_id: str, workflow: str, input: JsonValue) -> None:
        """Writes the key with the execution it created (same commit)."""
        row = IdempotencyRow(
            key, execution_id, workflow, digest(input), tx.now, tx.now + self.retention_ms
        )
        tx.changes[execution_id].idempotency = row
        self.pending[key] = row
        tx.idempotency.append(key)
        tx.after_commit.append(lambda: self._stored(row))

    def _stored(self, row: IdempotencyRow) -> None:
        if self.pending.get(row.key) is row:
            del self.pending[row.key]

    def forget(self, tx: Tx) -> None:
        """A group undone: its keys were never stored."""
        for key in tx.idempotency:
            row = self.pending.get(key)
            if row is not None and row.created_ms == tx.now:
                del self.pending[key]
