"""JSON values checked against IR types at the runtime's boundaries.

API contract (implementation lands with the evaluator work; signatures fixed):
defaults are applied recursively, Float accepts any JSON number (an integer
stays an integer), Int requires an integer, Duration a non-negative integer,
Timestamp/UUID/Bytes their string forms; messages name the path as
`$.amount: expected Float, found a string`.
"""

from __future__ import annotations

from typing import Any

from orbit_core.ir.types import Type


class ValidationError(ValueError):
    """`str(error)` is `<path>: <problem>`, e.g. `$.amount: expected Float, found a string`."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def conform(value: Any, type_: Type, *, defaults: bool = True, strict: bool = False) -> Any:
    """Returns `value` with declared defaults applied (when `defaults`), after
    checking it against `type_`. `strict` rejects record fields the type does not
    declare (only the execution input is strict). Raises ValidationError."""
    raise NotImplementedError
