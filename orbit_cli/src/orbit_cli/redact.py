"""Hiding sensitive values in what the CLI prints.

The API returns everything in clear text to callers allowed to read it; the
CLI masks the values of keys that look like secrets in `inspect`, `logs --json`
and the `output:` line of `status` (chapter 45). The dispatch `token` of
events and units is an opaque id, so it stays readable.
"""

from __future__ import annotations

from typing import Any

MASK = "***"
SENSITIVE = (
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "credential",
    "private_key",
    "card_number",
    "cvv",
)


def is_sensitive(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SENSITIVE)


def redact(value: Any) -> Any:
    """A copy of a JSON value with every sensitive key's value replaced by `***`."""
    if isinstance(value, dict):
        return {k: _redact_pair(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _redact_keeping_token(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v if k == "token" else _redact_pair(k, v) for k, v in record.items()}


def redact_event(event: dict[str, Any]) -> dict[str, Any]:
    """A history event, redacted; its own `token` field is the dispatch id."""
    return _redact_keeping_token(event)


def redact_state(state: dict[str, Any]) -> dict[str, Any]:
    """An execution state, redacted; each unit's `token` is the dispatch id."""
    return {k: _redact_units(v) if k == "units" else _redact_pair(k, v) for k, v in state.items()}


def _redact_units(units: Any) -> Any:
    if not isinstance(units, dict):
        return redact(units)
    return {
        key: _redact_keeping_token(unit) if isinstance(unit, dict) else redact(unit)
        for key, unit in units.items()
    }


def _redact_pair(key: str, value: Any) -> Any:
    return MASK if is_sensitive(key) else redact(value)
