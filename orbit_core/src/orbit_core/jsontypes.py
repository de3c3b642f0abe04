"""JSON values as types: what inputs, outputs, payloads and API documents hold.

`JsonValue` is recursive, so mypy makes code that looks inside a value narrow
it first (`isinstance`), and code that only carries a value along needs
nothing. Values the engine admits are checked at its entry points
(`limits.py`); inside the engine they are plain Python (dict, list, str,
int, float, bool, None)."""

from __future__ import annotations

from typing import TypeAlias

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"
