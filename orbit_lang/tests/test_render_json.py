"""The JSON renderer against chapters 06, 66 and 69."""

from __future__ import annotations

import json

from orbit_lang.diagnostics import Diagnostic, Label
from orbit_lang.render import render_json
from orbit_lang.source import SourceFile


def test_matches_the_book_byte_for_byte() -> None:
    line = '    step greet { worker "greeting.compose" // the task'
    src = SourceFile("messy.orbit", "\n" * 5 + line + "\n")
    start = src.offset(6, 25)
    diagnostic = Diagnostic.error(
        "E0300",
        "unknown worker task `greeting.compose`",
        src.span(start, start + 18),
        help='declare its contract: `task "greeting.compose" '
        '{ version "1.0.0" input { ... } output { ... } }`',
    )
    assert render_json([diagnostic]) == (
        "{\n"
        '  "diagnostics": [\n'
        "    {\n"
        '      "severity": "error",\n'
        '      "code": "E0300",\n'
        '      "message": "unknown worker task `greeting.compose`",\n'
        '      "location": { "file": "messy.orbit", "line": 6, "column": 25 },\n'
        '      "end_line": 6,\n'
        '      "end_column": 43,\n'
        '      "labels": [],\n'
        '      "notes": [],\n'
        '      "help": "declare its contract: `task \\"greeting.compose\\" '
        '{ version \\"1.0.0\\" input { ... } output { ... } }`"\n'
        "    }\n"
        "  ]\n"
        "}\n"
    )


def test_labels_notes_and_missing_help() -> None:
    src = SourceFile("n.orbit", "    on failure {\n\n\n    on failure {\n")
    first = src.offset(1, 8)
    second = src.offset(4, 8)
    diagnostic = Diagnostic.error(
        "E0319",
        "`on failure` is declared more than once",
        src.span(second, second + 7),
        labels=[Label(src.span(first, first + 7), "first declared here")],
        notes=["a note", "é"],
    )
    text = render_json([diagnostic, diagnostic])
    data = json.loads(text)
    assert data["diagnostics"][0] == {
        "severity": "error",
        "code": "E0319",
        "message": "`on failure` is declared more than once",
        "location": {"file": "n.orbit", "line": 4, "column": 8},
        "end_line": 4,
        "end_column": 15,
        "labels": [
            {
                "message": "first declared here",
                "location": {"file": "n.orbit", "line": 1, "column": 8},
                "end_line": 1,
                "end_column": 15,
            }
        ],
        "notes": ["a note", "é"],
        "help": None,
    }
    assert '"notes": [\n        "a note",\n        "é"\n      ],' in text


def test_no_diagnostics_and_no_location() -> None:
    assert json.loads(render_json([])) == {"diagnostics": []}
    unreadable = Diagnostic.error("E0206", "cannot read `x`: gone", None)
    entry = json.loads(render_json([unreadable]))["diagnostics"][0]
    assert (entry["location"], entry["end_line"], entry["end_column"]) == (None, None, None)
