"""The one way resources write a JSON body."""

from __future__ import annotations

from typing import Any

import falcon
import orjson


def send(resp: falcon.Response, body: Any, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(body)
