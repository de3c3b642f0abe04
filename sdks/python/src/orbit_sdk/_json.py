"""Request bodies as JSON: one encoder for the SDK, and bodies encoded ahead.

json.dumps with options builds a new encoder for every call; the worker sends
a body for every task, so the encoder is built once here. A task's result is
encoded once, when the worker checks that it is JSON, and those bytes go into
the report as they are (RawJson) instead of being encoded a second time.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from typing import Any, Callable

# Compact, and strict about NaN and infinities, which JSON does not have.
encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
# A str as encode and json.dumps write it (ASCII, escaped), without the
# encoder's own call in between: for the few strings of a body written out.
json_string: Callable[[str], str] = encode_basestring_ascii
_decode = json.JSONDecoder().decode


def decode(data: bytes) -> Any:
    """json.loads(data). An answer from the runtime is UTF-8 and an object, so
    json.loads's guess of the encoding is skipped when the body starts like
    one; any other body goes through json.loads itself."""
    if data[:1] == b"{" and data[1:2] != b"\x00":
        # What json.loads does for a body that it reads as UTF-8.
        return _decode(data.decode("utf-8", "surrogatepass"))
    return json.loads(data)


class RawJson:
    """A request body already encoded as JSON, sent as it is."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data
