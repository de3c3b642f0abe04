"""Printing helpers shared by every command: errors, colours, JSON and durations.

Results go to stdout and progress to stderr, so `orbit run --no-wait` and
`orbit logs --json` can be piped. Colour is only used when the stream is a
terminal and NO_COLOR is absent (https://no-color.org).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import IO, Any

import click


class CliError(click.ClickException):
    """A failure the user can act on: printed as `error: <message>`, exit status 1."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file or sys.stderr)


def colour_enabled(stream: IO[Any]) -> bool:
    if "NO_COLOR" in os.environ:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, *, err: bool, **style: Any) -> str:
    """`text` styled for stderr (err=True) or stdout, or unchanged when colour is off."""
    stream = sys.stderr if err else sys.stdout
    return click.style(text, **style) if colour_enabled(stream) else text


def out(text: str = "") -> None:
    click.echo(text)


def err(text: str = "") -> None:
    click.echo(text, err=True)


def pretty_json(value: Any) -> str:
    """Indented JSON, key order kept, two spaces as the book prints it."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def duration(ms: int | float) -> str:
    """A short human duration: `539ms`, `1.6s`, `2m14s`, `1h05m`."""
    ms = max(int(ms), 0)
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    seconds = ms // 1000
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_json_option(option: str, text: str) -> Any:
    """Parses a JSON command-line value, failing with `error: <option> is not valid JSON: ...`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{option} is not valid JSON: {json_error(exc)}") from None


def json_error(exc: json.JSONDecodeError) -> str:
    """The decoder's complaint in the wording the runtime uses (`expected value at line 1 column 1`)."""
    message = _JSON_MESSAGES.get(exc.msg, exc.msg[:1].lower() + exc.msg[1:])
    return f"{message} at line {exc.lineno} column {exc.colno}"


_JSON_MESSAGES = {
    "Expecting value": "expected value",
    "Extra data": "trailing characters",
    "Expecting property name enclosed in double quotes": "key must be a string",
}


def read_text(path: str) -> str:
    """A file's text, or `error: cannot read <path>: <reason>`."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {os_reason(exc)}") from None
    except UnicodeDecodeError:
        raise CliError(f"cannot read {path}: the file is not UTF-8 text") from None


def os_reason(exc: OSError) -> str:
    if exc.errno is not None and exc.strerror:
        return f"{exc.strerror} (os error {exc.errno})"
    return str(exc) or type(exc).__name__
