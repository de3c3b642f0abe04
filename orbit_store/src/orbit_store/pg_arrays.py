"""PostgreSQL array parameters that psycopg sends in binary without
looking at their elements.

A group's commit passes each column of its rows as one array (`unnest`), up
to 21 arrays per statement. psycopg's own list dumper inspects every list
for the type of its elements and dumps each element through a dumper it
looks up: about 10 us per array. `Texts`, `Int8s` and `Float8s` say their
type up front, and their dumpers write PostgreSQL's binary array format directly.
`register` installs them on a connection.
"""

from __future__ import annotations

import struct
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format


class Texts(list[str | None]):
    """A text[] parameter sent in binary by `_TextsDumper`."""


class Int8s(list[int]):
    """A bigint[] parameter sent in binary by `_Int8sDumper`."""


class Float8s(list[float | None]):
    """A float8[] parameter (NULLs allowed) sent in binary by `_Float8sDumper`."""


# The binary array format: dimensions, has-nulls flag, element type, then
# the length and lower bound of the one dimension; then each element as its
# length (-1: NULL) and bytes.
_ARRAY_HEAD = struct.Struct("!iiiii")
_EMPTY_ARRAY = struct.Struct("!iii")  # no dimensions, no nulls, the element type
_INT8_ITEM = struct.Struct("!iq")
_FLOAT8_ITEM = struct.Struct("!id")
_TEXT_OID, _TEXT_ARRAY_OID, _INT8_OID, _INT8_ARRAY_OID = 25, 1009, 20, 1016
_FLOAT8_OID, _FLOAT8_ARRAY_OID = 701, 1022


class _TextsDumper(Dumper):
    format = Format.BINARY
    oid = _TEXT_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        if not obj:
            return _EMPTY_ARRAY.pack(0, 0, _TEXT_OID)
        parts = [b""]
        nulls = 0
        for value in obj:
            if value is None:
                parts.append(b"\xff\xff\xff\xff")
                nulls = 1
            else:
                data = value.encode()
                parts.append(len(data).to_bytes(4, "big"))
                parts.append(data)
        parts[0] = _ARRAY_HEAD.pack(1, nulls, _TEXT_OID, len(obj), 1)
        return b"".join(parts)


class _Int8sDumper(Dumper):
    format = Format.BINARY
    oid = _INT8_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        if not obj:
            return _EMPTY_ARRAY.pack(0, 0, _INT8_OID)
        head = _ARRAY_HEAD.pack(1, 0, _INT8_OID, len(obj), 1)
        return head + b"".join([_INT8_ITEM.pack(8, value) for value in obj])


class _Float8sDumper(Dumper):
    format = Format.BINARY
    oid = _FLOAT8_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        if not obj:
            return _EMPTY_ARRAY.pack(0, 0, _FLOAT8_OID)
        nulls = 0
        parts = [b""]
        for value in obj:
            if value is None:
                parts.append(b"\xff\xff\xff\xff")
                nulls = 1
            else:
                parts.append(_FLOAT8_ITEM.pack(8, value))
        parts[0] = _ARRAY_HEAD.pack(1, nulls, _FLOAT8_OID, len(obj), 1)
        return b"".join(parts)


def register(conn: psycopg.Connection[Any]) -> None:
    """Lets `conn` send `Texts`, `Int8s` and `Float8s` parameters."""
    conn.adapters.register_dumper(Texts, _TextsDumper)
    conn.adapters.register_dumper(Int8s, _Int8sDumper)
    conn.adapters.register_dumper(Float8s, _Float8sDumper)
