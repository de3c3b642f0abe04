"""The `orbit` logger and the `message {json fields}` line format."""

from __future__ import annotations

import json
import logging
from typing import Any

from orbit_sdk._env import env

LOGGER = logging.getLogger("orbit")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def log_fields(level: int, message: str, fields: dict[str, Any], exc_info: bool = False) -> None:
    # Serialising the fields costs more than a filtered-out record, so skip it.
    if LOGGER.isEnabledFor(level):
        LOGGER.log(level, "%s %s", message, json.dumps(fields, default=str), exc_info=exc_info)


def fields_line(message: str, fields: dict[str, Any]) -> str:
    """The line log_fields writes, for a caller that decides later how to log it."""
    return f"{message} {json.dumps(fields, default=str)}"


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
