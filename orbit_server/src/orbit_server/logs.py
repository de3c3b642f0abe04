"""structlog, configured once per process, writing one line per event to stderr.

`--log-format text` prints `<time>  INFO orbit: <message> key=value ...` as the
book's examples do; `--log-format json` prints one JSON object per line with
`timestamp`, `level`, `fields` (holding `message`) and `target`. `ORBIT_LOG`
is the filter, in the spirit of tracing-subscriber's EnvFilter: comma-separated
directives, each a bare level (`error`, `warn`, `info`, `debug`, `trace`; the
default for every target) or `target=level`. The server's own lines have the
target `orbit` and every directive naming a target that starts with `orbit`
(the book's `orbit_runtime::engine` too) applies to them, the most verbose
winning; `gunicorn=...` sets gunicorn's. `parse_filter` reads it.

Every line passes through `orbit_store.urls.redact` on its way out: a
PostgreSQL URL's password never reaches the log, wherever a message or a
field carries it (with `secret_url`, neither does that URL's bare password).
The bearer tokens the server was given (`secrets`: the admin and shared
worker tokens) are replaced by `***` the same way, wherever they appear as a
whole token: not inside a longer run of letters, digits and underscores
(`_whole_tokens`). A credential is never part of a longer word where a line
could show it (a header, a field's value, a URL's path or query all end it
with punctuation or space), while a short token (`--token a`, which the start
already warns about) must not mask every word that contains it (issue 36).
"""

from __future__ import annotations

import logging
import re
import sys
import time
import traceback
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any, TextIO, cast

import attrs
import orjson
import structlog

from orbit_store.urls import redactor

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


_METHOD_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
}


@attrs.frozen
class LogFilter:
    """A parsed ORBIT_LOG: the default level and per-target levels."""

    default: int = logging.INFO
    targets: tuple[tuple[str, int], ...] = ()

    def level_for(self, target: str) -> int:
        family = "orbit" if target.startswith("orbit") else target
        levels = [
            level
            for name, level in self.targets
            if (name.startswith("orbit") and family == "orbit") or name == family
        ]
        return min(levels) if levels else self.default

    @property
    def lowest(self) -> int:
        return min([self.default, *(level for _, level in self.targets)])


def parse_filter(value: str | None) -> LogFilter:
    """ORBIT_LOG's directives; unknown levels are ignored (info stays)."""
    default: int | None = None
    targets: list[tuple[str, int]] = []
    for directive in (value or "").split(","):
        text = directive.strip().lower()
        target, _, name = text.rpartition("=")
        if name not in LEVELS:
            continue
        if target:
            targets.append((target, LEVELS[name]))
        elif default is None:
            default = LEVELS[name]
    return LogFilter(logging.INFO if default is None else default, tuple(targets))


def level_from_env(value: str | None) -> int:
    """The default level of an ORBIT_LOG value."""
    return parse_filter(value).default


_filter_in_force = LogFilter()
# The filter's level for each target asked about: `enabled` runs for every
# committed batch. Emptied by `configure`.
_target_levels: dict[str, int] = {}


def enabled(level: int, target: str = "orbit") -> bool:
    """Whether `configure` lets lines of this level through (cheap checks
    before formatting a message nobody will see)."""
    threshold = _target_levels.get(target)
    if threshold is None:
        threshold = _target_levels[target] = _filter_in_force.level_for(target)
    return level >= threshold


def configure(
    log_format: str,
    level: int | LogFilter = logging.INFO,
    secret_url: str | None = None,
    secrets: tuple[str, ...] = (),
) -> None:
    global _filter_in_force
    filter_ = level if isinstance(level, LogFilter) else LogFilter(level)
    _filter_in_force = filter_
    _target_levels.clear()
    render = _render_json if log_format == "json" else _render_text
    hidden = tuple(s for s in secrets if s)
    tokens = _whole_tokens(hidden)
    scrub = redactor(secret_url)

    def by_target(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        target = str(event.get("target", "orbit"))
        if _METHOD_LEVELS.get(method, logging.INFO) < filter_.level_for(target):
            raise structlog.DropEvent
        return event

    def redacted(logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
        line = scrub(render(logger, method, event))
        if tokens is not None and any(secret in line for secret in hidden):
            line = tokens.sub("***", line)
        return line

    processors: list[Any] = [redacted] if not filter_.targets else [by_target, redacted]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(filter_.lowest),
        logger_factory=structlog.PrintLoggerFactory(cast(TextIO, _Stderr())),
        cache_logger_on_first_use=False,
    )


# What may continue a word: a token is masked only where none precedes or
# follows it.
_WORD = "A-Za-z0-9_"


def _whole_tokens(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """A pattern of `secrets` where each stands as a whole token, or None."""
    if not secrets:
        return None
    # Longest first, so a secret that contains another is masked whole.
    ordered = sorted(set(secrets), key=len, reverse=True)
    alternatives = "|".join(re.escape(s) for s in ordered)
    return re.compile(f"(?<![{_WORD}])(?:{alternatives})(?![{_WORD}])")


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


# The formatted second of the last line: lines come many per second, and
# formatting a whole timestamp costs more than the rest of a short line.
_second: tuple[int, str] = (-1, "")


def _now() -> str:
    global _second
    seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
    cached = _second
    if cached[0] != seconds:
        stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        cached = _second = (seconds, stamp)
    return f"{cached[1]}.{nanos // 1000:06d}Z"


def _level(method: str) -> str:
    return _NAMES.get(method, method.upper())


def _split(
    event: MutableMapping[str, Any],
) -> tuple[str, str, str | None, MutableMapping[str, Any]]:
    message = str(event.pop("event", ""))
    if "event_" in event:
        # structlog takes `event` for the message: a field of that name
        # (the debug line's event type) is passed as `event_`.
        renamed = [("event" if key == "event_" else key, value) for key, value in event.items()]
        event.clear()
        event.update(renamed)
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


# What makes a field's text ambiguous unquoted (`\s` matches what `str.isspace` does).
_NEEDS_QUOTES = re.compile(r'[\s"]')


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = str(value)
    if isinstance(value, Quoted) or not text or _NEEDS_QUOTES.search(text):
        return orjson.dumps(text).decode()
    return text


def _render_json(_logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
    message, target, trace, fields = _split(event)
    body: dict[str, Any] = {"message": message, **fields}
    if trace:
        body["exception"] = trace
    record = {"timestamp": _now(), "level": _level(method), "fields": body, "target": target}
    return orjson.dumps(record, default=str).decode()
