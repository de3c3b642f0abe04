"""Request bodies as JSON: one encoder for the SDK, and bodies encoded ahead.

json.dumps with options builds a new encoder for every call; the worker sends
a body for every task, so the encoder is built once here. A task's result is
encoded once, when the worker checks that it is JSON, and those bytes go into
the report as they are (RawJson) instead of being encoded a second time.
"""

from __future__ import annotations

import json

# Compact, and strict about NaN and infinities, which JSON does not have.
encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


class RawJson:
    """A request body already encoded as JSON, sent as it is."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data
