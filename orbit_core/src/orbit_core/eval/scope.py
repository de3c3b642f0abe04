"""What an expression reads, and the one error it may raise."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from orbit_core.jsontypes import JsonValue


class EvalError(Exception):
    """A runtime expression error (division by zero, overflow, a failed conversion,
    a JSON value of the wrong shape). `str(error)` is the cause alone, e.g.
    `division by zero`; callers prefix the position (`evaluating `compute`: ...`)."""


@attrs.frozen
class Scope:
    """What an expression may read.

    `steps` maps step names to outputs; a step that is absent, or maps to None,
    reads as null. `vars` holds loop variables and lambda parameters.
    `execution` is `{"id": ..., "workflow": ..., "version": ...}`.
    """

    input: JsonValue = attrs.field(factory=dict)
    execution: Mapping[str, str] = attrs.field(factory=dict)
    steps: Mapping[str, JsonValue] = attrs.field(factory=dict)
    vars: Mapping[str, JsonValue] = attrs.field(factory=dict)
    failure: JsonValue = None
    event: JsonValue = None
