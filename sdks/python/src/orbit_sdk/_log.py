"""The `orbit` logger and the `message {json fields}` line format.

A worker logs a line for every task it runs (the book's `executing {...}`
line, at INFO, which is on by default), so log_fields is on the hot path of
every step. It builds the same record Logger.log would, minus the cost of
finding the caller: Logger.log walks the stack to find the first frame
outside the logging package, which is always log_fields itself, so the
record names this function, as before.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from orbit_sdk._env import env

LOGGER = logging.getLogger("orbit")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# json.dumps(fields, default=str), without building an encoder per line.
_encode_fields = json.JSONEncoder(default=str).encode


def log_fields(level: int, message: str, fields: dict[str, Any], exc_info: bool = False) -> None:
    # Serialising the fields costs more than a filtered-out record, so skip it.
    if not LOGGER.isEnabledFor(level):
        return
    info = sys.exc_info() if exc_info else None
    args = (message, _encode_fields(fields))
    record = LOGGER.makeRecord(
        LOGGER.name, level, __file__, _CALL_LINE, "%s %s", args, info, "log_fields"
    )
    LOGGER.handle(record)


# Where the records say they come from: log_fields, as findCaller would say.
_CALL_LINE = log_fields.__code__.co_firstlineno


def fields_line(message: str, fields: dict[str, Any]) -> str:
    """The line log_fields writes, for a caller that decides later how to log it."""
    return f"{message} {_encode_fields(fields)}"


def configure_logging() -> None:
    """basicConfig at ORBIT_LOG_LEVEL; a no-op when logging is already set up."""
    logging.basicConfig(level=_level(env("ORBIT_LOG_LEVEL")), format=LOG_FORMAT)


def _level(name: str | None) -> int:
    if name is None:
        return logging.INFO
    if name.isdigit():
        return int(name)
    level = logging.getLevelName(name.strip().upper())
    return level if isinstance(level, int) else logging.INFO
