"""The one way resources write a JSON body.

orjson writes at most 254 levels of nesting. Everything a caller sends is
limited to 128 (`orbit_core.limits`), but a workflow can nest values further
(a record around a step's output, an input carried through continue-as-new),
so a document orjson refuses is written by the standard library instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import falcon
import orjson


def send(
    resp: falcon.Response,
    body: Any,
    status: int = 200,
    *,
    stream: Callable[[bytes], Iterable[bytes]] | None = None,
) -> None:
    """`body` as JSON; `stream`, when given, turns the encoded bytes into the
    WSGI iterable that carries them (to learn whether they were sent)."""
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    data = encode(body)
    if stream is None:
        resp.data = data
    else:
        resp.content_length = len(data)
        resp.stream = stream(data)


def encode(body: Any) -> bytes:
    """`body` as the JSON bytes `send` writes."""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
