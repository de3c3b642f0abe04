"""The formatter's layout rules (chapter 49), one small golden per rule, and
its refusals: lexical errors and a failed safety check."""

from __future__ import annotations

from pathlib import Path

import pytest
from book_programs import BOOK

from orbit_lang import formatter
from orbit_lang.formatter import FormatError, format_source

CHAPTER = BOOK / "examples" / "49-formatter"


def fmt(text: str) -> str:
    return format_source(text, "t.orbit").text


def test_chapter_example_before_and_after() -> None:
    before = (CHAPTER / "0030.orbit").read_text(encoding="utf-8")
    after = (CHAPTER / "0044.orbit").read_text(encoding="utf-8")
    result = format_source(before, "messy.orbit")
    assert result.changed
    assert result.text == after
    again = format_source(after, "messy.orbit")
    assert not again.changed
    assert again.text == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # around infix operators and `=`; after `:` and `,`
        ("x{a:1+2*3,b=c}", "x { a: 1 + 2 * 3, b = c }"),
        ("a  &&b||  c", "a && b || c"),
        ("a==b != c<=d>=e<f>g", "a == b != c <= d >= e < f > g"),
        # none inside () and [], before `:` `,` `.` `?`, after `!` and unary minus
        ("f( a , b )", "f(a, b)"),
        ("[ 1 ,2 ]", "[1, 2]"),
        ("x . y ? ", "x.y?"),
        ("! a", "!a"),
        ("a = - 1", "a = -1"),
        ("a - - 1", "a - -1"),
        ("f(- x)", "f(-x)"),
        ("{ a: -b, c: [-1] }", "{ a: -b, c: [-1] }"),
        # a function name and its `(`; a group after a keyword or operator
        ("len (x) + (a+b)", "len(x) + (a + b)"),
        ("if(a)then(b)else(c)", "if (a) then (b) else (c)"),
        ("return(a)", "return (a)"),
        # an index after an operand; a list after a keyword or operator
        ('x ["k"] + y [0] [1]', 'x["k"] + y[0][1]'),
        ("for item in[1,2]", "for item in [1, 2]"),
        # generic types are tight
        ("List < Map < String , Int > >", "List<Map<String, Int>>"),
        ("x: List < Int > ? = []", "x: List<Int>? = []"),
        ("x: Map<String,{ a: Int }>", "x: Map<String, { a: Int }>"),
        # `{}` stays empty; one space inside a non-empty `{}`
        ("a {   }", "a {}"),
        ("a{b}", "a { b }"),
        ("f({a:1})", "f({ a: 1 })"),
        ("[{a:1},{b:2}]", "[{ a: 1 }, { b: 2 }]"),
        # lambdas
        ("map(xs,x=>x*2)", "map(xs, x => x * 2)"),
        # the path of an `expect step` keeps its colons tight
        ("expect step on_failure : summary SUCCEEDED", "expect step on_failure:summary SUCCEEDED"),
        ("expect step a output {x:1}", "expect step a output { x: 1 }"),
        # optional colons and separators
        ('worker:"a";timeout 1s', 'worker: "a"; timeout 1s'),
    ],
)
def test_spacing(before: str, after: str) -> None:
    assert fmt(before + "\n") == after + "\n"


def test_indentation_is_four_spaces_per_open_bracket() -> None:
    before = "workflow W {\nstep a {\nwith {\nx: f(\n1,\n[\n2\n]\n)\n}\n}\n}\n"
    after = (
        "workflow W {\n"
        "    step a {\n"
        "        with {\n"
        "            x: f(\n"
        "                1,\n"
        "                [\n"
        "                    2\n"
        "                ]\n"
        "            )\n"
        "        }\n"
        "    }\n"
        "}\n"
    )
    assert fmt(before) == after


def test_a_line_starting_with_closers_is_outdented_by_each() -> None:
    # Two brackets opened on one line are two levels, closed together.
    before = "a {\nb: f({\nc: 1\n})\nd: [\n{ e: 1 },\n{ e: 2 }]\n}\n"
    after = (
        "a {\n    b: f({\n            c: 1\n    })\n"
        "    d: [\n        { e: 1 },\n        { e: 2 }]\n}\n"
    )
    assert fmt(before) == after


def test_continuation_lines_get_one_more_level() -> None:
    before = (
        "workflow W {\n"
        "return {\n"
        "a: input.a\n"
        "+ input.b\n"
        "* 2,\n"
        "b: input.a &&\n"
        "input.b,\n"
        "c: if x\n"
        "then 1\n"
        "else 2\n"
        "d: -input.b\n"
        "}\n"
        "}\n"
    )
    after = (
        "workflow W {\n"
        "    return {\n"
        "        a: input.a\n"
        "            + input.b\n"
        "            * 2,\n"
        "        b: input.a &&\n"
        "            input.b,\n"
        "        c: if x\n"
        "            then 1\n"
        "            else 2\n"
        "        d: -input.b\n"
        "    }\n"
        "}\n"
    )
    assert fmt(before) == after


def test_a_mock_chain_continued_with_then_is_indented() -> None:
    before = 'test "t" {\nmock "a" fails "X" retryable times 2\nthen returns { ok: true }\n}\n'
    after = 'test "t" {\n    mock "a" fails "X" retryable times 2\n        then returns { ok: true }\n}\n'
    assert fmt(before) == after


def test_blank_lines() -> None:
    before = "\n\nschema A {\n\na: Int\n\n\n\nb: Int\n\n}\n\n\nschema B { c: Int }\n\n\n"
    after = "schema A {\n    a: Int\n\n    b: Int\n}\n\nschema B { c: Int }\n"
    assert fmt(before) == after


def test_trailing_whitespace_and_final_newline() -> None:
    assert fmt("schema A { a: Int }   \t") == "schema A { a: Int }\n"
    assert fmt("schema A { a: Int }\n\n\n\n") == "schema A { a: Int }\n"
    assert fmt("") == ""
    assert fmt("\n\n  \n") == ""


def test_comments_are_kept_and_placed() -> None:
    before = (
        "   // leading\n"
        "schema A {   // after a brace\n"
        "        // own line, too deep\n"
        "a: Int      // end of line   \n"
        "/* block */ b: /* inner */ Int\n"
        "  /// doc\n"
        "c: Int\n"
        "}\n"
        "// last\n"
    )
    after = (
        "// leading\n"
        "schema A { // after a brace\n"
        "    // own line, too deep\n"
        "    a: Int // end of line\n"
        "    /* block */ b: /* inner */ Int\n"
        "    /// doc\n"
        "    c: Int\n"
        "}\n"
        "// last\n"
    )
    assert fmt(before) == after


def test_multi_line_block_comments_are_verbatim() -> None:
    before = (
        "schema A {\n  /* first\n      keeps   its   spacing   \n   /* nested */\n  */  a: Int\n}\n"
    )
    after = (
        "schema A {\n"
        "    /* first\n"
        "      keeps   its   spacing   \n"
        "   /* nested */\n"
        "  */ a: Int\n"
        "}\n"
    )
    assert fmt(before) == after
    assert fmt(after) == after


def test_windows_line_endings_are_kept() -> None:
    before = "schema A {\r\na:Int // x\r\n/* a\r\n b */\r\n}\r\n"
    assert fmt(before) == "schema A {\r\n    a: Int // x\r\n    /* a\r\n b */\r\n}\r\n"


def test_a_byte_order_mark_is_kept() -> None:
    assert fmt("\ufeffschema A{a:Int}") == "\ufeffschema A { a: Int }\n"


def test_tokens_that_would_join_keep_a_space() -> None:
    # Syntax errors still format, but never into other tokens.
    assert fmt("f( ! = 1)\n") == "f(! = 1)\n"
    assert fmt("x: 1 . 5\n") == "x: 1. 5\n"
    assert fmt("a ( / / b)\n") == "a(/ / b)\n"


def test_syntax_errors_do_not_prevent_formatting() -> None:
    assert fmt("workflow {{ step\n") == "workflow { { step\n"


def test_an_unchanged_file_is_reported_unchanged() -> None:
    result = format_source("schema A { a: Int }\n", "t.orbit")
    assert not result.changed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('workflow A { x: "abc\n}\n', "unterminated string literal"),
        ("workflow A { # }\n", "unexpected character `#`"),
        ("/* open\n", "unterminated block comment"),
    ],
)
def test_lexical_errors_are_refused(text: str, message: str) -> None:
    with pytest.raises(FormatError) as raised:
        format_source(text, "lexbad.orbit")
    assert str(raised.value) == f"cannot format a file with lexical errors: {message}"


def test_a_layout_that_changes_the_tokens_fails_the_safety_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A broken layout: joins every line, which moves line breaks the grammar
    # depends on.
    original = formatter._Layout.run

    def joined(self: formatter._Layout) -> str:
        return original(self).replace("\n", " ").strip() + "\n"

    monkeypatch.setattr(formatter._Layout, "run", joined)
    with pytest.raises(FormatError) as raised:
        format_source("schema A {\na: Int\n}\n", "t.orbit")
    assert str(raised.value) == (
        "formatter safety check failed (a line break around line 2 was added or removed); "
        "the file was left unchanged"
    )


@pytest.mark.parametrize(
    ("broken", "detail"),
    [
        (lambda text: text.replace("Int", "Float"), "token `Int` at line 1 became `Float`"),
        (lambda text: text.replace("// c", "// d"), "a comment changed"),
        (lambda text: text.replace("a: Int", "a: Int b"), "the output has a different number"),
        (lambda text: text.replace("a: Int", 'a: "'), "the output does not lex"),
    ],
)
def test_the_safety_check_names_what_changed(
    monkeypatch: pytest.MonkeyPatch, broken: object, detail: str
) -> None:
    original = formatter._Layout.run
    monkeypatch.setattr(formatter._Layout, "run", lambda self: broken(original(self)))  # type: ignore[operator]
    with pytest.raises(FormatError, match="formatter safety check failed") as raised:
        format_source("schema A {a: Int} // c\n", "t.orbit")
    assert detail in str(raised.value)


def test_a_doc_comment_that_would_detach_fails_the_safety_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = formatter._Layout.run
    monkeypatch.setattr(
        formatter._Layout, "run", lambda self: original(self).replace("/// d\n", "/// d\n\n")
    )
    with pytest.raises(FormatError, match="a doc comment moved"):
        format_source("/// d\nschema  A { a: Int }\n", "t.orbit")


def test_examples_directory_is_formatted() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    for path in sorted(examples.glob("*.orbit")):
        text = path.read_text(encoding="utf-8")
        assert not format_source(text, str(path)).changed, path


def test_the_formatter_knows_the_grammar_binary_operators() -> None:
    from orbit_lang.syntax import grammar

    assert formatter.BINARY_OPERATORS == grammar.BINARY_OPERATORS
