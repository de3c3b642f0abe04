"""Renders diagnostics as the human text the book prints, or as JSON.

Human form, for a gutter as wide as the largest line number shown (w):

    error[E0304]: circular dependency between steps
    <w spaces>--> file:line:column
    <w+1 spaces>|
    8 | source line
    <w+1 spaces>| <column padding>^^^^^ primary text
    <w+1 spaces>| <column padding>----- secondary text
    <w+1 spaces>= note: ...
    <w+1 spaces>= help: ...

The primary line comes first, then the lines of the secondary labels in the
order the labels were given; each source line is printed once, followed by
one marker line per label on it (primary first).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import TextIO

from orbit_lang.diagnostics import Diagnostic, Label, Severity, count
from orbit_lang.source import SourceFile, Span

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_SEVERITY_STYLE = {Severity.ERROR: "\x1b[1;31m", Severity.WARNING: "\x1b[1;33m"}
_GUTTER_STYLE = "\x1b[1;34m"


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if self.color and text else text


def render_human(
    diagnostic: Diagnostic, sources: Mapping[str, SourceFile], *, color: bool = False
) -> str:
    """One diagnostic as text, ending with a newline (no blank line after it)."""
    paint = _Style(color)
    severity_style = _SEVERITY_STYLE[diagnostic.severity]
    header = paint(f"{diagnostic.severity.value}[{diagnostic.code}]", severity_style)
    out = [f"{header}{paint(': ' + diagnostic.message, _BOLD)}"]
    span = diagnostic.span
    if span is None:
        return "\n".join([*out, *_footer(diagnostic, "", paint)]) + "\n"

    source = sources.get(span.file)
    markers = [(span, diagnostic.label, True)] + [
        (label.span, label.message, False) for label in diagnostic.labels
    ]
    lines: list[int] = []
    for marker_span, _, _ in markers:
        if marker_span.line not in lines:
            lines.append(marker_span.line)
    width = len(str(max(lines)))
    pad = " " * width
    bar = paint("|", _GUTTER_STYLE)
    out.append(f"{pad}{paint('-->', _GUTTER_STYLE)} {span.file}:{span.line}:{span.column}")
    out.append(f"{pad} {bar}")
    if source is not None:
        for line in lines:
            text = source.line_text(line)
            number = paint(f"{line:<{width}}", _GUTTER_STYLE)
            out.append(f"{number} {bar} {_expand(text)}".rstrip())
            for marker_span, message, primary in markers:
                if marker_span.line != line:
                    continue
                start = marker_span.column - 1
                end = start + _marker_length(marker_span, text)
                indent = len(_expand(text[:start]))
                length = max(1, len(_expand(text[:end])) - indent)
                symbol = "^" if primary else "-"
                style = severity_style if primary else _GUTTER_STYLE
                mark = paint(symbol * length + (f" {message}" if message else ""), style)
                out.append(f"{pad} {bar} {' ' * indent}{mark}")
    out.extend(_footer(diagnostic, pad, paint))
    return "\n".join(out) + "\n"


def _footer(diagnostic: Diagnostic, pad: str, paint: _Style) -> list[str]:
    """The `= note:` and `= help:` lines."""
    equals = paint("=", _GUTTER_STYLE)
    lines = [f"{pad} {equals} {paint('note', _BOLD)}: {note}" for note in diagnostic.notes]
    if diagnostic.help is not None:
        lines.append(f"{pad} {equals} {paint('help', _BOLD)}: {diagnostic.help}")
    return lines


def _expand(text: str) -> str:
    # Tabs are shown as four spaces so that markers line up under them.
    return text.replace("\t", "    ")


def _marker_length(span: Span, line_text: str) -> int:
    if span.end_line == span.line:
        return max(1, span.end_column - span.column)
    # A span over several lines is marked up to the end of its first line.
    return max(1, len(line_text) - span.column + 1)


def render_human_all(
    diagnostics: Iterable[Diagnostic], sources: Mapping[str, SourceFile], *, color: bool = False
) -> str:
    """Every diagnostic, each followed by a blank line, as the CLI prints them."""
    return "".join(render_human(d, sources, color=color) + "\n" for d in diagnostics)


def render_report(
    diagnostics: Iterable[Diagnostic], sources: Mapping[str, SourceFile], *, color: bool = False
) -> str:
    """What a compiling command prints on stderr: every diagnostic, then the
    closing `error: compilation failed: ...` line when there are errors
    (`policy check failed` when every error is a policy's P code)."""
    diagnostics = list(diagnostics)
    text = render_human_all(diagnostics, sources, color=color)
    errors, warnings = count(diagnostics)
    if errors:
        if all(d.code.startswith("P") for d in diagnostics if d.is_error):
            message = f"policy check failed: {errors} error(s), {warnings} warning(s)"
        else:
            message = summary(errors, warnings)
        text += error_line(message, color=color)
    return text


def summary(errors: int, warnings: int) -> str:
    """The closing message of a failed compilation (see `error_line`)."""
    return f"compilation failed: {errors} error(s), {warnings} warning(s)"


def error_line(message: str, *, color: bool = False) -> str:
    """`error: <message>` as commands print it on stderr, with a newline."""
    return f"{_Style(color)('error', _SEVERITY_STYLE[Severity.ERROR])}: {message}\n"


def should_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _location(span: Span) -> str:
    return f'{{ "file": {_string(span.file)}, "line": {span.line}, "column": {span.column} }}'


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _label_json(label: Label) -> str:
    span = label.span
    return (
        f'{{ "message": {_string(label.message)}, "location": {_location(span)}, '
        f'"end_line": {span.end_line}, "end_column": {span.end_column} }}'
    )


def _list(items: list[str], indent: str) -> str:
    if not items:
        return "[]"
    inner = ",\n".join(f"{indent}  {item}" for item in items)
    return f"[\n{inner}\n{indent}]"


def diagnostic_json(diagnostic: Diagnostic, indent: str = "    ") -> str:
    """One diagnostic as the JSON object the book shows, indented by `indent`."""
    span = diagnostic.span
    labels = list(diagnostic.labels)
    if span is not None and diagnostic.label:
        labels.insert(0, Label(span, diagnostic.label))
    inner = indent + "  "
    fields = [
        f'"severity": {_string(diagnostic.severity.value)}',
        f'"code": {_string(diagnostic.code)}',
        f'"message": {_string(diagnostic.message)}',
        f'"location": {_location(span) if span else "null"}',
        f'"end_line": {span.end_line if span else "null"}',
        f'"end_column": {span.end_column if span else "null"}',
        f'"labels": {_list([_label_json(label) for label in labels], inner)}',
        f'"notes": {_list([_string(note) for note in diagnostic.notes], inner)}',
        f'"help": {_string(diagnostic.help) if diagnostic.help is not None else "null"}',
    ]
    body = ",\n".join(f"{inner}{field}" for field in fields)
    return f"{indent}{{\n{body}\n{indent}}}"


def render_json(diagnostics: Iterable[Diagnostic]) -> str:
    """`{"diagnostics": [...]}` laid out as the book prints it, with a final newline."""
    items = [diagnostic_json(d) for d in diagnostics]
    if not items:
        return '{\n  "diagnostics": []\n}\n'
    return '{\n  "diagnostics": [\n' + ",\n".join(items) + "\n  ]\n}\n"
