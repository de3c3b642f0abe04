"""JSON values written as ORBIT constants, for generated `orbit test` cases."""

from __future__ import annotations

import json
import re
from typing import Any

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = frozenset({"true", "false", "null"})


def literal(value: Any) -> str:
    """`value` as an ORBIT expression: objects `{ a: 1 }`, lists `[1, 2]`."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        text = repr(value)
        return text if ("." in text or "e" in text or "n" in text) else text + ".0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        entries = ", ".join(f"{_key(k)}: {literal(v)}" for k, v in value.items())
        return "{ " + entries + " }"
    raise TypeError(f"not a JSON value: {value!r}")


def _key(name: str) -> str:
    if _NAME.fullmatch(name) and name not in _RESERVED:
        return name
    return json.dumps(name, ensure_ascii=False)
