"""Where two task contracts first differ, for the worker handshake's refusal.

Both sides are contract documents (`canonical.contract_document`): the one a
deployed workflow pins and the one a worker's generated code was made from.
The walk visits the input before the output and a record's fields in the
deployed order, then the fields only the worker has, so the answer is the
same for the same pair whichever server computes it.
"""

from __future__ import annotations

from orbit_core.ir.codec import IRError, type_from_json
from orbit_core.ir.types import render_type
from orbit_core.jsontypes import JsonValue


def first_difference(deployed: JsonValue, presented: JsonValue) -> str | None:
    """`input.items[].quantity: Int deployed, Float in the worker's contract`,
    or None when the two documents are equal where they are compared."""
    if not isinstance(deployed, dict) or not isinstance(presented, dict):
        return None if deployed == presented else "the contract"
    for key in ("name", "version"):
        if deployed.get(key) != presented.get(key):
            return f"{key}: {deployed.get(key)!r} deployed, {presented.get(key)!r} in the worker's"
    for key in ("input", "output"):
        found = _types(deployed.get(key), presented.get(key), key)
        if found is not None:
            return found
    return None


def _render(value: JsonValue) -> str:
    try:
        return render_type(type_from_json(value))
    except IRError:
        return "an unreadable type"


def _types(deployed: JsonValue, presented: JsonValue, path: str) -> str | None:
    if deployed == presented:
        return None
    if not isinstance(deployed, dict) or not isinstance(presented, dict):
        return f"{path}: {_render(deployed)} deployed, {_render(presented)} in the worker's"
    kind = deployed.get("kind")
    if kind != presented.get("kind"):
        return f"{path}: {_render(deployed)} deployed, {_render(presented)} in the worker's"
    if kind == "list":
        return _types(deployed.get("items"), presented.get("items"), path + "[]")
    if kind == "map":
        return _types(deployed.get("values"), presented.get("values"), path + "{}")
    if kind == "optional":
        return _types(deployed.get("type"), presented.get("type"), path)
    if kind == "record":
        return _records(deployed, presented, path)
    return f"{path}: {_render(deployed)} deployed, {_render(presented)} in the worker's"


def _records(
    deployed: dict[str, JsonValue], presented: dict[str, JsonValue], path: str
) -> str | None:
    mine = _fields(deployed)
    theirs = _fields(presented)
    for name, field in mine.items():
        where = f"{path}.{name}"
        other = theirs.get(name)
        if other is None:
            return f"{where}: deployed, missing from the worker's"
        found = _types(field.get("type"), other.get("type"), where)
        if found is not None:
            return found
        if field.get("default") != other.get("default") or ("default" in field) != (
            "default" in other
        ):
            return f"{where}: its default differs"
    for name in theirs:
        if name not in mine:
            return f"{path}.{name}: in the worker's contract, not deployed"
    if deployed.get("name") != presented.get("name"):
        return f"{path}: schema {deployed.get('name')!r} deployed, {presented.get('name')!r} in the worker's"
    return None


def _fields(record: dict[str, JsonValue]) -> dict[str, dict[str, JsonValue]]:
    fields = record.get("fields")
    found: dict[str, dict[str, JsonValue]] = {}
    if isinstance(fields, list):
        for field in fields:
            if isinstance(field, dict) and isinstance(field.get("name"), str):
                found.setdefault(str(field["name"]), field)
    return found
