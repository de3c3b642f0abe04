"""Parser behaviour that chapters 26 and 31 and RULINGS §1 pin down."""

from __future__ import annotations

from pathlib import Path

import pytest
from book_programs import BOOK, book_programs

from orbit_lang import ast
from orbit_lang.parser import parse_file, parse_source
from orbit_lang.source import SourceFile
from orbit_lang.syntax.builder import Builder
from orbit_lang.syntax.lexer import tokenize
from orbit_lang.syntax.parser import _Recovery

DATA = Path(__file__).parent / "data" / "parser"


def _return(expression: str) -> ast.Expr:
    """Parses `expression` as a workflow's return value; it must be valid."""
    module, diagnostics = parse_source(
        f'workflow W {{\n    version "1.0.0"\n    return {expression}\n}}\n', "w.orbit"
    )
    assert diagnostics == []
    (workflow,) = module.declarations
    assert isinstance(workflow, ast.Workflow)
    member = workflow.members[-1]
    assert isinstance(member, ast.Return)
    return member.expression


def _codes(text: str) -> list[str]:
    return [d.code for d in parse_source(text, "x.orbit")[1]]


def _entries(expression: ast.Expr) -> dict[str, ast.Expr]:
    assert isinstance(expression, ast.ObjectLiteral)
    return {entry.key: entry.value for entry in expression.entries}


def test_a_line_that_starts_with_a_binary_operator_continues() -> None:
    entries = _entries(_return("{\n sum: input.a\n   + input.b\n same: 1\n   == 1\n}"))
    assert list(entries) == ["sum", "same"]
    assert isinstance(entries["sum"], ast.Binary) and entries["sum"].operator == "+"


def test_a_line_that_starts_with_minus_begins_a_new_entry() -> None:
    entries = _entries(_return("{ a: 1\n b: -2 }"))
    assert entries == {
        "a": ast.IntLiteral(1, entries["a"].span),
        "b": ast.IntLiteral(-2, entries["b"].span),
    }
    items = _return("[1\n-2\n(3)\n[4]]")
    assert isinstance(items, ast.ListLiteral)
    assert [type(item).__name__ for item in items.items] == [
        "IntLiteral",
        "IntLiteral",
        "IntLiteral",
        "ListLiteral",
    ]


def test_postfix_operators_must_stay_on_their_operands_line() -> None:
    assert _codes('workflow W {\n version "1"\n return input\n   .a\n}\n') == ["E0102"]
    assert isinstance(_return("input /* same line */ .a"), ast.MemberAccess)
    # A block comment spanning lines is a line break.
    assert _codes("workflow W {\n return input /*\n */ .a\n}\n") == ["E0102"]


def test_a_lambda_arrow_must_follow_its_parameter_on_the_same_line() -> None:
    call = _return("map(input.items, x =>\n x * 2)")
    assert isinstance(call, ast.Call) and isinstance(call.arguments[1], ast.Lambda)
    assert "E0100" in _codes("workflow W {\n return map(input.items, x\n => x)\n}\n")


def test_precedence_and_left_associativity() -> None:
    def shape(e: ast.Expr) -> object:
        if isinstance(e, ast.Binary):
            return (shape(e.left), e.operator, shape(e.right))
        if isinstance(e, ast.Unary):
            return (e.operator, shape(e.operand))
        if isinstance(e, ast.IntLiteral | ast.BoolLiteral):
            return e.value
        raise AssertionError(e)

    assert shape(_return("1 + 2 * 3 == 7 && !false")) == (
        ((1, "+", (2, "*", 3)), "==", 7),
        "&&",
        ("!", False),
    )
    assert shape(_return("10 - 3 - 2")) == ((10, "-", 3), "-", 2)
    assert shape(_return("1 || 2 && 3 != 4 < 5 % 6")) == (
        1,
        "||",
        (2, "&&", (3, "!=", (4, "<", (5, "%", 6)))),
    )


def test_a_lambda_body_extends_as_far_as_possible() -> None:
    call = _return("map(input.items, x => x * 2 + 1)")
    assert isinstance(call, ast.Call)
    lambda_ = call.arguments[1]
    assert isinstance(lambda_, ast.Lambda) and isinstance(lambda_.body, ast.Binary)
    assert lambda_.body.operator == "+"


def test_numbers_and_durations() -> None:
    items = _return(
        "[1_000, 0.5, 1_000.25, 500ms, 1.5s, 2m, 1h, 1d, 0.0005s, -9223372036854775807]"
    )
    assert isinstance(items, ast.ListLiteral)
    values = [getattr(i, "value", getattr(i, "milliseconds", None)) for i in items.items]
    assert values == [
        1000,
        0.5,
        1000.25,
        500,
        1500,
        120_000,
        3_600_000,
        86_400_000,
        1,
        -(2**63 - 1),
    ]
    # The minus folds after the range check.
    assert _codes("workflow W {\n return -9223372036854775808\n}\n") == ["E0006"]
    assert "E0100" in _codes("workflow W {\n return .5\n}\n")
    assert _codes("workflow W {\n return [5.]\n}\n")[0] == "E0100"


def test_only_true_false_and_null_are_reserved() -> None:
    text = (DATA / "ok" / "keywords.orbit").read_text(encoding="utf-8")
    assert parse_source(text, "k.orbit")[1] == []
    assert _codes("schema S { null: Int }\n") == ["E0100"]
    entries = _entries(_return('{ "null": 1, "content-type": "x", if: 2 }'))
    assert list(entries) == ["null", "content-type", "if"]


def test_member_colons_and_separators() -> None:
    _, diagnostics = parse_source(
        'task "t" { version: "1" ; description "d", input: { a: Int } output JSON }\n'
        'workflow W { version: "1"\n timeout: 5s\n step a { worker: "t", timeout: 1s; after: b }\n'
        " step b { sleep: 1s } }\n",
        "m.orbit",
    )
    assert diagnostics == []
    # retry, compensate and for take no colon.
    assert "E0100" in _codes("workflow W { step a { retry: { attempts: 2 } } }\n")
    assert "E0100" in _codes('workflow W { step a { compensate: { worker "x" } } }\n')
    assert "E0102" in _codes("workflow W { step a { for: x in [] } }\n")


def test_after_needs_commas_between_steps() -> None:
    module, diagnostics = parse_source(
        "workflow W { step a { after b, c\n after d } }\n", "a.orbit"
    )
    assert diagnostics == []
    workflow = module.declarations[0]
    assert isinstance(workflow, ast.Workflow)
    step = workflow.members[0]
    assert isinstance(step, ast.Step)
    afters = [m for m in step.members if isinstance(m, ast.After)]
    assert [[s.name for s in m.steps] for m in afters] == [["b", "c"], ["d"]]
    assert _codes("workflow W { step a { after b c } }\n") == ["E0102"]


def test_query_and_continue_as_new_forms() -> None:
    module, diagnostics = parse_source(
        "workflow W {\n query a = 1\n query b: 2\n query c 3\n"
        " continue_as_new when true with {}\n continue_as_new with {} when false\n"
        " continue_as_new when true\n}\n",
        "q.orbit",
    )
    assert diagnostics == []
    members = module.declarations[0].members  # type: ignore[union-attr]
    assert [m.name.name for m in members[:3]] == ["a", "b", "c"]  # type: ignore[union-attr]
    forms = [(m.input is not None, m.condition is not None) for m in members[3:]]  # type: ignore[union-attr]
    assert forms == [(True, True), (True, True), (False, True)]


def test_unknown_members_and_handlers() -> None:
    assert _codes("workflow W { on success { } }\n") == ["E0105"]
    assert _codes('workflow W { step a { wroker "x" } }\n') == ["E0102"]
    diagnostic = parse_source('workflow W { step a { wroker "x" } }\n', "w.orbit")[1][0]
    assert diagnostic.help == "did you mean `worker`?"
    assert _codes("workflow W { step a { compensate { compensate { } } } }\n") == ["E0102"]


def test_duplicate_object_keys() -> None:
    diagnostics = parse_source('workflow W { return { id: 1, "id": 2 } }\n', "d.orbit")[1]
    assert [(d.code, d.message, d.span.column) for d in diagnostics if d.span] == [
        ("E0107", "duplicate field `id` in object", 30)
    ]


def test_never_raises_on_deep_nesting() -> None:
    for depth in (50, 400, 3000):
        module, diagnostics = parse_source(
            "workflow W { return " + "[" * depth + "]" * depth + " }\n", "deep.orbit"
        )
        assert isinstance(module, ast.Module)
    _, diagnostics = parse_source("workflow W { return " + "(" * 20_000 + " }\n", "deep.orbit")
    assert diagnostics and all(d.span is not None for d in diagnostics)


def test_parse_file_reports_an_unreadable_file(tmp_path: Path) -> None:
    module, diagnostics = parse_file(tmp_path / "missing.orbit")
    assert module.declarations == ()
    assert [(d.code, d.span) for d in diagnostics] == [("E0206", None)]


def _valid_sources() -> list[Path]:
    """The golden valid files, and the book's whole programs when the
    repository's extracted examples are at hand."""
    sources = sorted((DATA / "ok").glob("*.orbit"))
    sources += [BOOK / e["source"] for e in book_programs() if "expected" not in e]
    return sources


VALID_SOURCES = _valid_sources()


@pytest.mark.parametrize(
    "path", VALID_SOURCES, ids=[f"{p.parent.name}/{p.name}" for p in VALID_SOURCES]
)
def test_recovery_builds_the_same_tree_as_the_grammar(path: Path) -> None:
    """The recovering driver and the one-match fast path agree on valid input."""
    source = SourceFile(path.name, path.read_text(encoding="utf-8"))
    module, diagnostics = parse_source(source.text, source.path)
    assert diagnostics == []
    lexed = tokenize(source)
    builder = Builder(source, lexed.tokens, lexed.doc_lines, [])
    assert tuple(_Recovery(builder).program()) == module.declarations
    assert builder.diagnostics == []
