"""structlog, configured once per process, writing one line per event to stderr.

`--log-format text` prints `<time>  INFO orbit: <message> key=value ...` as the
book's examples do; `--log-format json` prints one JSON object per line with
`timestamp`, `level`, `fields` (holding `message`) and `target`. `ORBIT_LOG`
sets the level (`error`, `warn`, `info`, `debug` or `trace`; the first bare
level among comma-separated directives wins, per-target directives are not
supported).

Every line passes through `orbit_store.urls.redact` on its way out: a
PostgreSQL URL's password never reaches the log, wherever a message or a
field carries it (with `secret_url`, neither does that URL's bare password).
The bearer tokens the server was given (`secrets`: the admin and shared
worker tokens) are replaced by `***` the same way, wherever they appear.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any, TextIO, cast

import orjson
import structlog

from orbit_store.urls import redact

LEVELS = {
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
}
_NAMES = {"critical": "ERROR", "exception": "ERROR", "warning": "WARN"}


class Quoted(str):
    """A value the text format prints in quotes (as `backend="sqlite"`)."""

    __slots__ = ()


def level_from_env(value: str | None) -> int:
    for directive in (value or "").split(","):
        name = directive.strip().lower()
        if name in LEVELS:
            return LEVELS[name]
    return logging.INFO


_level_in_force = logging.INFO


def enabled(level: int) -> bool:
    """Whether `configure` lets lines of this level through (cheap checks
    before formatting a message nobody will see)."""
    return level >= _level_in_force


def configure(
    log_format: str,
    level: int = logging.INFO,
    secret_url: str | None = None,
    secrets: tuple[str, ...] = (),
) -> None:
    global _level_in_force
    _level_in_force = level
    render = _render_json if log_format == "json" else _render_text
    hidden = tuple(s for s in secrets if s)

    def redacted(logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
        line = redact(render(logger, method, event), secret_url)
        for secret in hidden:
            if secret in line:
                line = line.replace(secret, "***")
        return line

    structlog.configure(
        processors=[redacted],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(cast(TextIO, _Stderr())),
        cache_logger_on_first_use=False,
    )


class _Stderr:
    """Whatever `sys.stderr` is when a line is written (tests replace it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def logger() -> Any:
    """The server's logger; every line names `orbit` as its target."""
    # Unbound and lazy: it follows whatever `configure` set up, even when a
    # module took it at import time.
    return structlog.get_logger(target="orbit")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _level(method: str) -> str:
    return _NAMES.get(method, method.upper())


def _split(
    event: MutableMapping[str, Any],
) -> tuple[str, str, str | None, MutableMapping[str, Any]]:
    message = str(event.pop("event", ""))
    target = str(event.pop("target", "orbit"))
    exc_info = event.pop("exc_info", None)
    trace = None
    if isinstance(exc_info, BaseException):
        trace = "".join(traceback.format_exception(exc_info)).rstrip()
    elif exc_info:
        trace = "".join(traceback.format_exception(*sys.exc_info())).rstrip()
    return message, target, trace, event


def _render_text(_logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
    message, target, trace, fields = _split(event)
    parts = [f"{_now()} {_level(method):>5} {target}: {message}"]
    parts.extend(f"{key}={_text(value)}" for key, value in fields.items())
    line = " ".join(parts)
    return f"{line}\n{trace}" if trace else line


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = str(value)
    if isinstance(value, Quoted) or not text or any(c.isspace() or c == '"' for c in text):
        return orjson.dumps(text).decode()
    return text


def _render_json(_logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
    message, target, trace, fields = _split(event)
    body: dict[str, Any] = {"message": message, **fields}
    if trace:
        body["exception"] = trace
    record = {"timestamp": _now(), "level": _level(method), "fields": body, "target": target}
    return orjson.dumps(record, default=str).decode()
