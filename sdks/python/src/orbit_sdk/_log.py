"""The `orbit` logger and the `message {json fields}` line format.

A worker logs a line for every task it runs (the book's `executing {...}`
line, at INFO, which is on by default), so that line is on the hot path of
every step, and what it costs is paid once per task:

- log_fields builds the same record Logger.log would, minus the cost of
  finding the caller: Logger.log walks the stack to find the first frame
  outside the logging package, which is always log_fields itself, so the
  record names this function, as before (log_line is the same, for a line
  whose fields are already JSON);
- the `executing` fields are written out directly (Context._executing_json)
  instead of through json.dumps, which builds an encoder object per call;
- the handler configure_logging installs (_LineHandler) formats the one
  LOG_FORMAT with `_LineFormatter`, which writes the same text as
  logging.Formatter but formats the date and time of a second once, not
  once per line, and flushes each line without taking its lock again.
"""

from __future__ import annotations

import json
import logging
import sys
import time
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
    _emit(level, message, _encode_fields(fields), exc_info)


def log_line(level: int, message: str, fields_json: str) -> None:
    """log_fields for fields already encoded as log_fields would encode them."""
    if LOGGER.isEnabledFor(level):
        _emit(level, message, fields_json, False)


def _emit(level: int, message: str, fields_json: str, exc_info: bool) -> None:
    info = sys.exc_info() if exc_info else None
    record = LOGGER.makeRecord(
        LOGGER.name,
        level,
        __file__,
        _CALL_LINE,
        "%s %s",
        (message, fields_json),
        info,
        "log_fields",
    )
    LOGGER.handle(record)


# Where the records say they come from: log_fields, as findCaller would say.
_CALL_LINE = log_fields.__code__.co_firstlineno


def fields_line(message: str, fields: dict[str, Any]) -> str:
    """The line log_fields writes, for a caller that decides later how to log it."""
    return f"{message} {_encode_fields(fields)}"


class _LineFormatter(logging.Formatter):
    """logging.Formatter(LOG_FORMAT), the same text at a lower cost per line.

    strftime of the local time is most of a line's formatting; lines come
    many a second, so the text of the current second is kept and only the
    milliseconds are added per line. A record carrying an exception or a
    stack goes through logging.Formatter.format unchanged."""

    def __init__(self) -> None:
        super().__init__(LOG_FORMAT)
        # The second (int(created)) whose date and time text is kept, and it.
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None or self.default_msec_format is None:
            return super().formatTime(record, datefmt)
        created = record.created
        second, text = self._second
        if second != int(created) or created < 0:
            text = time.strftime(self.default_time_format, self.converter(created))
            self._second = (int(created), text)
        return self.default_msec_format % (text, record.msecs)

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        return f"{record.asctime} {record.levelname} {record.name} {record.message}"


class _LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """logging.StreamHandler, whose emit flushes the stream through flush(),
    which takes the handler's lock again (handle() already holds it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            stream = self.stream
            stream.write(line + self.terminator)
            stream.flush()
        except RecursionError:  # as StreamHandler.emit does
            raise
        except Exception:
            self.handleError(record)


def configure_logging() -> None:
    """basicConfig at ORBIT_LOG_LEVEL, with LOG_FORMAT on stderr; a no-op when
    logging is already set up."""
    handler = _LineHandler()
    handler.setFormatter(_LineFormatter())
    logging.basicConfig(level=_level(env("ORBIT_LOG_LEVEL")), handlers=[handler])


def _level(name: str | None) -> int:
    if name is None:
        return logging.INFO
    if name.isdigit():
        return int(name)
    level = logging.getLevelName(name.strip().upper())
    return level if isinstance(level, int) else logging.INFO
