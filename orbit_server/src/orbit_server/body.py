"""Reading JSON request bodies the way chapter 67 says (query parameters: params.py).

The checks run in the HTTP layer's order: a body larger than `--max-body` is
refused before it is read (413), a body without the JSON content type is 415,
invalid JSON is 400 and a missing or mistyped field 422, all in plain text.
Unknown fields are ignored. orjson reads at most 1024 levels of nesting (a
deeper body is invalid JSON here); the values inside are then held to the
engine's stricter limits (`orbit_core.limits`, 128 levels, 64-bit integers),
which it answers in the JSON envelope with the route's code.
"""

from __future__ import annotations

from typing import Any

import falcon
import orjson

from orbit_server.errors import bad_body, bad_json, not_json, too_large

ABSENT: Any = object()
_CHUNK = 64 * 1024
_JSON_TYPES = ("application/json",)


def read_json(req: falcon.Request, max_body: int, *, required: bool) -> Any:
    """The parsed body. Without a body, `ABSENT` when the body is optional;
    a required body must carry the JSON content type even when empty."""
    length = req.content_length
    if length is not None and length > max_body:
        raise too_large()
    has_body = bool(length) or (length is None and req.get_header("transfer-encoding") is not None)
    if (required or has_body) and not _is_json(req.content_type):
        raise not_json()
    raw = _read(req, length, max_body) if has_body else b""
    if not raw and not required:
        return ABSENT
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_json(str(exc) if raw else "EOF while parsing a value") from None


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media in _JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


def _read(req: falcon.Request, length: int | None, max_body: int) -> bytes:
    if length is not None:
        return req.bounded_stream.read(length)
    # A chunked body: the server's input stream ends with it. Read until
    # then, giving up past the limit.
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = req.stream.read(_CHUNK)
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > max_body:
            raise too_large()
        parts.append(chunk)


class Fields:
    """Typed access to the fields of a JSON object body (422 when they do not fit)."""

    __slots__ = ("_body", "_where")

    def __init__(self, body: Any, where: str = "") -> None:
        """`where`: the path of a nested object (`poll.`), for messages."""
        if not isinstance(body, dict):
            at = f"{where[:-1]}: " if where else ""
            raise bad_body(f"{at}invalid type: {_kind(body)}, expected a JSON object")
        self._body: dict[str, Any] = body
        self._where = where

    def object(self, name: str) -> Fields | None:
        """An optional nested object, None when absent or null."""
        value = self._get(name, False)
        return None if value is None else Fields(value, f"{self._where}{name}.")

    def string(self, name: str, *, required: bool = False) -> str | None:
        value = self._get(name, required)
        if value is None or isinstance(value, str):
            return value
        raise bad_body(f"{self._where}{name}: invalid type: {_kind(value)}, expected a string")

    def required_string(self, name: str) -> str:
        value = self.string(name, required=True)
        assert value is not None
        return value

    def integer(self, name: str) -> int | None:
        value = self._get(name, False)
        if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            return value
        raise bad_body(
            f"{self._where}{name}: invalid type: {_kind(value)}, expected a non-negative integer"
        )

    def boolean(self, name: str, default: bool) -> bool:
        value = self._get(name, False)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        raise bad_body(f"{self._where}{name}: invalid type: {_kind(value)}, expected a boolean")

    def any(self, name: str) -> Any:
        return self._body.get(name)

    def objects(self, name: str, *fields: str) -> list[dict[str, str]]:
        """A required list of objects whose `fields` are all strings."""
        value = self._get(name, True)
        if not isinstance(value, list):
            raise bad_body(f"{name}: invalid type: {_kind(value)}, expected a sequence")
        out = []
        for i, item in enumerate(value):
            where = f"{name}[{i}]"
            if not isinstance(item, dict):
                raise bad_body(f"{where}: invalid type: {_kind(item)}, expected a JSON object")
            for field in fields:
                if item.get(field) is None:
                    raise bad_body(f"{where}: missing field `{field}`")
                if not isinstance(item[field], str):
                    kind = _kind(item[field])
                    raise bad_body(f"{where}.{field}: invalid type: {kind}, expected a string")
            out.append({field: item[field] for field in fields})
        return out

    def raw_list(self, name: str) -> list[dict[str, Any]]:
        """The objects of a list `objects` has already checked."""
        value = self._get(name, False)
        return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []

    def _get(self, name: str, required: bool) -> Any:
        if name not in self._body or (required and self._body[name] is None):
            if required:
                raise bad_body(f"{self._where}missing field `{name}`")
            return None
        return self._body[name]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "sequence"
    return "map"
