"""`orbit fmt [--check] FILES...`: rewrite .orbit files in the canonical layout.

Every file is handled on its own: one that cannot be read or formatted is
reported and the others still are. Progress and errors go to stderr
(`formatted <file>`, `would reformat <file>`, `error: <file>: ...`); an
already formatted file is not touched and prints nothing. Exit 1 when a file
failed, when --check found one to reformat, or when no files were given.

A file is replaced atomically (a temporary file in the same directory,
renamed over it) with its permission bits kept, so an interrupted run
leaves either the old text or the new one. Only UTF-8 text is rewritten:
decoding anything else would change the bytes the formatter did not mean
to touch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

import click

from orbit_cli.output import os_reason
from orbit_cli.sources import stderr_colour
from orbit_lang.formatter import FormatError, format_source
from orbit_lang.render import error_line

# The compiler's limit (orbit_lang.parser.MAX_SOURCE_BYTES), kept here so
# that formatting does not load the parser.
MAX_SOURCE_BYTES = 2 * 1024 * 1024
# Non-blocking, so that opening a FIFO that replaced the file cannot hang.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


@click.command(
    "fmt", short_help="Format .orbit files in place (comments and line breaks are preserved)"
)
@click.argument("files", nargs=-1)
@click.option(
    "--check",
    is_flag=True,
    help="Change nothing on disk; name (`would reformat <file>`) every file whose layout "
    "would change, and exit 1 if there is one.",
)
def fmt(files: tuple[str, ...], check: bool) -> None:
    """Rewrite .orbit files in the canonical layout, keeping every comment and line break."""
    color = stderr_colour(files)
    failed = False
    for name in files:
        try:
            result = format_source(_read(name), name)
        except _Unreadable as error:
            click.echo(error_line(f"cannot read {name}: {error}", color=color), nl=False, err=True)
            failed = True
            continue
        except FormatError as error:
            click.echo(error_line(f"{name}: {error}", color=color), nl=False, err=True)
            failed = True
            continue
        if not result.changed:
            continue
        if check:
            click.echo(f"would reformat {name}", err=True)
            failed = True
            continue
        try:
            _write(Path(name), result.text)
        except OSError as error:
            message = f"cannot write {name}: {os_reason(error)}"
            click.echo(error_line(message, color=color), nl=False, err=True)
            failed = True
            continue
        click.echo(f"formatted {name}", err=True)
    sys.exit(1 if failed else 0)


class _Unreadable(Exception):
    pass


def _read(name: str) -> str:
    """The file's text, exactly as stored. Like the compiler, only a regular
    file of at most 2 MiB is read (a FIFO would block, a device never end);
    unlike it, text that is not UTF-8 is refused rather than replaced, since
    the formatter writes the text back."""
    try:
        _refuse(os.stat(name))
        # Checked again on the open file: the path may have changed between.
        fd = os.open(name, _OPEN_FLAGS)
        try:
            _refuse(os.fstat(fd))
            with os.fdopen(fd, "rb", closefd=False) as source:
                data = source.read(MAX_SOURCE_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as error:
        raise _Unreadable(os_reason(error)) from None
    if len(data) > MAX_SOURCE_BYTES:
        raise _Unreadable("the file is too large")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unreadable("the file is not UTF-8 text") from None


def _refuse(status: os.stat_result) -> None:
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if not stat.S_ISREG(status.st_mode):
        raise _Unreadable("not a regular file")
    if status.st_size > MAX_SOURCE_BYTES:
        raise _Unreadable(f"the file is too large ({status.st_size:,} bytes)")


def _write(path: Path, text: str) -> None:
    mode = stat.S_IMODE(os.stat(path).st_mode)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


# The lazy command table imports each command module as `cli`.
cli = fmt
