"""The human renderer against diagnostics the book prints (chapters 13, 19,
20, 24, 69 ...), built by hand; every byte must match."""

from __future__ import annotations

import io

import pytest

from orbit_lang.diagnostics import Diagnostic, Label
from orbit_lang.render import (
    error_line,
    render_human,
    render_report,
    should_color,
    summary,
)
from orbit_lang.source import SourceFile, Span


def _source(path: str, lines: dict[int, str]) -> SourceFile:
    last = max(lines)
    return SourceFile(path, "\n".join(lines.get(n, "") for n in range(1, last + 1)) + "\n")


def _at(source: SourceFile, line: int, column: int, length: int) -> Span:
    start = source.offset(line, column)
    return source.span(start, start + length)


def test_secondary_labels_on_the_primary_line_and_the_next() -> None:
    src = _source(
        "loop.orbit",
        {
            8: '    step first { worker "a.run" with { n: second.v } }',
            9: '    step second { worker "a.run" with { n: first.v } }',
        },
    )
    diagnostic = Diagnostic.error(
        "E0304",
        "circular dependency between steps",
        _at(src, 8, 10, 5),
        labels=[
            Label(_at(src, 8, 43, 6), "`first` depends on `second`"),
            Label(_at(src, 9, 44, 5), "`second` depends on `first`"),
        ],
        notes=["cycle: first -> second -> first"],
        help="the step graph must be acyclic; remove one of these dependencies",
    )
    assert render_human(diagnostic, {src.path: src}) == (
        "error[E0304]: circular dependency between steps\n"
        " --> loop.orbit:8:10\n"
        "  |\n"
        '8 |     step first { worker "a.run" with { n: second.v } }\n'
        "  |          ^^^^^\n"
        "  |                                           ------ `first` depends on `second`\n"
        '9 |     step second { worker "a.run" with { n: first.v } }\n'
        "  |                                            ----- `second` depends on `first`\n"
        "  = note: cycle: first -> second -> first\n"
        "  = help: the step graph must be acyclic; remove one of these dependencies\n"
    )


def test_several_labels_under_the_primary_span() -> None:
    src = _source("progress.orbit", {5: "    query remaining = count + 1"})
    diagnostic = Diagnostic.error(
        "E0406",
        "operator `+` cannot be applied to `Int?` and `Int`",
        _at(src, 5, 23, 9),
        labels=[Label(_at(src, 5, 23, 5), "`Int?`"), Label(_at(src, 5, 31, 1), "`Int`")],
        help="one operand may be `null`; use `coalesce(value, default)` first",
    )
    assert render_human(diagnostic, {src.path: src}) == (
        "error[E0406]: operator `+` cannot be applied to `Int?` and `Int`\n"
        " --> progress.orbit:5:23\n"
        "  |\n"
        "5 |     query remaining = count + 1\n"
        "  |                       ^^^^^^^^^\n"
        "  |                       ----- `Int?`\n"
        "  |                               - `Int`\n"
        "  = help: one operand may be `null`; use `coalesce(value, default)` first\n"
    )


def test_a_label_on_an_earlier_line_comes_after_the_primary_line() -> None:
    src = _source("notify.orbit", {4: "    on failure {", 7: "    on failure {"})
    diagnostic = Diagnostic.error(
        "E0319",
        "`on failure` is declared more than once",
        _at(src, 7, 8, 7),
        labels=[Label(_at(src, 4, 8, 7), "first declared here")],
    )
    assert render_human(diagnostic, {src.path: src}) == (
        "error[E0319]: `on failure` is declared more than once\n"
        " --> notify.orbit:7:8\n"
        "  |\n"
        "7 |     on failure {\n"
        "  |        ^^^^^^^\n"
        "4 |     on failure {\n"
        "  |        ------- first declared here\n"
    )


def test_warning_with_a_labelled_line_above() -> None:
    src = _source(
        "diag3.orbit",
        {6: "    continue_as_new with { cursor: page.next }", 7: "    return { pages: page.next }"},
    )
    diagnostic = Diagnostic.warning(
        "W0607",
        "`return` is never used: `continue_as_new` has no `when`, so every run continues",
        _at(src, 7, 12, 20),
        labels=[Label(_at(src, 6, 5, 42), "always continues")],
        help="add `when <condition>` to `continue_as_new`, or remove `return`",
    )
    assert render_human(diagnostic, {src.path: src}) == (
        "warning[W0607]: `return` is never used: `continue_as_new` has no `when`, "
        "so every run continues\n"
        " --> diag3.orbit:7:12\n"
        "  |\n"
        "7 |     return { pages: page.next }\n"
        "  |            ^^^^^^^^^^^^^^^^^^^^\n"
        "6 |     continue_as_new with { cursor: page.next }\n"
        "  |     ------------------------------------------ always continues\n"
        "  = help: add `when <condition>` to `continue_as_new`, or remove `return`\n"
    )


def test_two_digit_line_numbers_widen_the_gutter() -> None:
    src = _source("risk.orbit", {11: "        using pyhton"})
    diagnostic = Diagnostic.warning(
        "W0301",
        "unknown worker language `pyhton`",
        _at(src, 11, 15, 6),
        help="did you mean `python`?",
    )
    assert render_human(diagnostic, {src.path: src}) == (
        "warning[W0301]: unknown worker language `pyhton`\n"
        "  --> risk.orbit:11:15\n"
        "   |\n"
        "11 |         using pyhton\n"
        "   |               ^^^^^^\n"
        "   = help: did you mean `python`?\n"
    )


def test_several_notes_then_help() -> None:
    src = _source("payout.orbit", {19: "    step charge {"})
    diagnostic = Diagnostic.error(
        "P0105",
        "policy rule `x`: step `charge` calls `payments.charge` without a guaranteed approval",
        _at(src, 19, 10, 6),
        notes=["first note", "second note"],
        help="waive it",
    )
    assert render_human(diagnostic, {src.path: src}).splitlines()[-3:] == [
        "   = note: first note",
        "   = note: second note",
        "   = help: waive it",
    ]


def test_a_span_over_several_lines_is_marked_to_the_end_of_its_first_line() -> None:
    src = SourceFile("a.orbit", "x {\n  y\n}\n")
    diagnostic = Diagnostic.error("E0100", "m", src.span(2, 9))
    assert render_human(diagnostic, {src.path: src}).splitlines()[4] == "  |   ^"


def test_a_diagnostic_without_a_location_is_one_line() -> None:
    diagnostic = Diagnostic.error(
        "E0206", "cannot read `x.orbit`: No such file or directory (os error 2)", None
    )
    assert render_human(diagnostic, {}) == (
        "error[E0206]: cannot read `x.orbit`: No such file or directory (os error 2)\n"
    )


def test_report_separates_diagnostics_and_closes_with_the_counts() -> None:
    src = _source("a.orbit", {1: "x"})
    error = Diagnostic.error("E0104", "expected a declaration, found `x`", _at(src, 1, 1, 1))
    warning = Diagnostic.warning("W0201", "version `1.0` is not semantic", _at(src, 1, 1, 1))
    text = render_report([error, warning], {src.path: src})
    assert text.endswith("\n\nerror: compilation failed: 1 error(s), 1 warning(s)\n")
    assert text.count("\n\n") == 2
    assert render_report([warning], {src.path: src}).endswith("^\n\n")


def test_colour_is_only_added_on_request() -> None:
    src = _source("a.orbit", {1: "x"})
    diagnostic = Diagnostic.error("E0104", "expected a declaration", _at(src, 1, 1, 1))
    assert "\x1b[" not in render_human(diagnostic, {src.path: src})
    coloured = render_human(diagnostic, {src.path: src}, color=True)
    assert "\x1b[1;31merror[E0104]\x1b[0m" in coloured
    assert error_line(summary(1, 0), color=True).startswith("\x1b[1;31merror\x1b[0m: ")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "no_color", "expected"),
    [(_Terminal(), None, True), (_Terminal(), "1", False), (io.StringIO(), None, False)],
)
def test_colour_only_on_a_terminal_without_no_color(
    stream: io.StringIO, no_color: str | None, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    assert should_color(stream) is expected


def test_tabs_are_expanded_and_markers_follow() -> None:
    src = SourceFile("t.orbit", "\tstep\tx\n")
    diagnostic = Diagnostic.error("E0104", "expected a declaration, found `x`", src.span(6, 7))
    assert render_human(diagnostic, {src.path: src}).splitlines()[3:5] == [
        "1 |     step    x",
        "  |             ^",
    ]
