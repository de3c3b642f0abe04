"""The one way resources write a JSON body."""

from __future__ import annotations

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
    data = orjson.dumps(body)
    if stream is None:
        resp.data = data
    else:
        resp.content_length = len(data)
        resp.stream = stream(data)
