"""`orbit docs` and `orbit schema` (chapter 56): the chapter's transcripts and
pages as golden files (definition hashes masked), the JSON Schemas checked
against the draft 2020-12 meta-schema with `jsonschema`, the type mapping
table, the book's example payloads accepted and its invalid one refused with
the chapter's messages, and the errors with their exit codes.
"""

from __future__ import annotations

import html.parser
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from jsonschema import Draft202012Validator

from orbit_cli.main import cli

# The golden fixture of conftest.py: (name, actual text).
Golden = Callable[[str, str], None]
FIXTURES = Path(__file__).parent / "fixtures" / "graphs"
ALL = [
    "approval.orbit",
    "checkout.orbit",
    "fulfilment.orbit",
    "order_processing.orbit",
    "refunds.orbit",
    "shipment.orbit",
    "subscription.orbit",
]


@pytest.fixture
def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "examples"
    shutil.copytree(FIXTURES, root)
    monkeypatch.chdir(root)
    return root


def orbit(*args: str) -> Result:
    return CliRunner(env={"NO_COLOR": "1"}).invoke(cli, list(args), catch_exceptions=False)


def schemas(*files: str) -> dict[str, Any]:
    result = orbit("schema", *files)
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


# --- orbit docs ---------------------------------------------------------------


def test_docs_example_writes_the_pages_and_schemas(book: Path, golden: Golden) -> None:
    result = orbit("docs", "refunds.orbit", "--output", "ref", "--json-schema")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    golden("docs_refunds", result.stderr)
    golden("docs_refunds_Refund_md", Path("ref/Refund.md").read_text())
    golden("docs_refunds_contracts_md", Path("ref/contracts.md").read_text())
    golden("docs_refunds_index_md", Path("ref/index.md").read_text())
    assert sorted(p.name for p in Path("ref/schemas").iterdir()) == [
        "task.payments.payout.input.schema.json",
        "task.payments.payout.output.schema.json",
        "workflow.Refund.input.schema.json",
        "workflow.Refund.output.schema.json",
        "workflow.Refund.signal.approval.schema.json",
    ]


def test_docs_continue_as_new_section(book: Path, golden: Golden) -> None:
    result = orbit("docs", "subscription.orbit", "--output", "reference")
    assert result.exit_code == 0, result.output
    golden("docs_subscription", result.stderr)
    page = Path("reference/Subscription.md").read_text()
    section = page[page.index("## Continue-as-new") : page.index("## Diagram")]
    golden("docs_subscription_continue_as_new", section)


def test_docs_continue_as_new_lists_defaults_and_always(book: Path) -> None:
    Path("loop.orbit").write_text(
        "workflow Loop {\n"
        '    version "1.0.0"\n'
        '    input { n: Int, label: String = "x", note: String? }\n'
        "    step wait { sleep 1m }\n"
        "    continue_as_new with { n: input.n + 1 }\n"
        "}\n",
        encoding="utf-8",
    )
    result = orbit("docs", "loop.orbit", "-o", "out")
    assert result.exit_code == 0, result.output
    page = Path("out/Loop.md").read_text()
    assert "always continues and never completes by itself" in page
    assert '| `label` | default `"x"` |' in page
    assert "| `note` | `null` |" in page
    assert "| `n` | `input.n + 1` |" in page


def test_docs_html_pages_are_self_contained(book: Path, golden: Golden) -> None:
    result = orbit("docs", *ALL, "-o", "site", "--format", "html", "--json-schema")
    assert result.exit_code == 0, result.output
    pages = sorted(p.name for p in Path("site").glob("*.html"))
    assert pages == [
        "Checkout.html",
        "Fulfilment.html",
        "OrderApproval.html",
        "OrderProcessing.html",
        "Refund.html",
        "Shipment.html",
        "Shipping.html",
        "Subscription.html",
        "contracts.html",
        "index.html",
    ]
    for name in pages:
        text = Path("site", name).read_text()
        _check_html(text)
        for needle in ("<script", "<link", "<img", "@import", "http://", "https://"):
            if needle.startswith("http"):
                # the only absolute URL allowed is the SVG namespace
                text = text.replace('xmlns="http://www.w3.org/2000/svg"', "")
            assert needle not in text, (name, needle)
        assert "prefers-color-scheme" in text
    refund = Path("site/Refund.html").read_text()
    assert (
        '<a href="contracts.html#task-payments-payout"><code>payments.payout</code></a>' in refund
    )
    assert "<svg" in refund and "<details><summary>Mermaid source</summary>" in refund
    golden("docs_refunds_Refund_html", refund)


class _Balanced(html.parser.HTMLParser):
    VOID = frozenset({"meta", "br", "hr", "img", "input", "link", "path", "rect"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (self.stack[-3:], tag)
        self.stack.pop()


def _check_html(text: str) -> None:
    parser = _Balanced()
    parser.feed(text)
    parser.close()
    assert parser.stack == []


def test_doc_comments_cannot_inject_html(book: Path) -> None:
    Path("doc.orbit").write_text(
        "/// Uses <b>bold</b> & `code` and [a link](https://example.com/x).\n"
        "/// [bad](javascript:alert(1))\n"
        "workflow Doc {\n"
        '    version "1.0.0"\n'
        "    step s { sleep 1s }\n"
        "}\n",
        encoding="utf-8",
    )
    result = orbit("docs", "doc.orbit", "-o", "out", "--format", "html")
    assert result.exit_code == 0, result.output
    page = Path("out/Doc.html").read_text()
    assert "Uses &lt;b&gt;bold&lt;/b&gt; &amp; <code>code</code>" in page
    assert '<a href="https://example.com/x">a link</a>' in page
    assert "javascript:" not in page
    _check_html(page)


def test_docs_field_tables_reach_nested_records(book: Path) -> None:
    Path("nested.orbit").write_text(
        "schema Price {\n    /// Minor units.\n    amount: Int\n    currency: String\n}\n"
        "workflow Nested {\n"
        '    version "1.0.0"\n'
        "    input {\n"
        "        items: List<{ sku: String, qty: Int }>\n"
        "        prices: Map<String, Price>\n"
        "        address: { city: String }?\n"
        "    }\n"
        "    step s { sleep 1s }\n"
        "}\n",
        encoding="utf-8",
    )
    result = orbit("docs", "nested.orbit", "-o", "out")
    assert result.exit_code == 0, result.output
    page = Path("out/Nested.md").read_text()
    for row in (
        "| `items[].sku` | `String` | yes |",
        "| `prices{}.amount` | `Int` | yes |  | Minor units. |",
        "| `address` | `{ city: String }?` | no |",
        "| `address.city` | `String` | yes |",
    ):
        assert row in page


def test_docs_lists_contracts_no_workflow_uses(book: Path) -> None:
    result = orbit("docs", "contracts.orbit", "-o", "out")
    assert result.exit_code == 0, result.output
    contracts = Path("out/contracts.md").read_text()
    assert '<a id="task-payments-charge"></a>' in contracts
    assert "| Used by | no workflow |" in contracts
    assert Path("out/index.md").exists()


def test_docs_writes_nothing_when_the_files_do_not_compile(book: Path) -> None:
    Path("bad.orbit").write_text('workflow Bad { version "1.0.0" step s { worker "x.y" } }\n')
    result = orbit("docs", "bad.orbit", "-o", "out")
    assert result.exit_code == 1
    assert "bad.orbit:1:" in result.stderr
    assert not Path("out").exists()


def test_docs_needs_an_output_directory(book: Path) -> None:
    assert orbit("docs", "refunds.orbit").exit_code == 2


def test_docs_unwritable_output_is_a_clear_error(book: Path) -> None:
    Path("taken").write_text("a file")
    result = orbit("docs", "refunds.orbit", "-o", "taken")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot write taken/index.md: ")


# --- orbit schema ----------------------------------------------------------------


def test_schema_example(book: Path, golden: Golden) -> None:
    result = orbit("schema", "refunds.orbit", "-o", "schemas")
    assert result.exit_code == 0, result.output
    golden("schema_refunds", result.stderr)
    golden(
        "schema_refunds_signal_approval",
        Path("schemas/workflow.Refund.signal.approval.schema.json").read_text(),
    )


def test_every_schema_is_valid_draft_2020_12(book: Path) -> None:
    found = schemas(*ALL)
    assert len(found) > 30
    for name, schema in found.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].startswith(f"urn:orbit:{name}@")
        assert schema["title"]


def test_the_books_invalid_payload_is_refused_with_its_messages(book: Path) -> None:
    schema = schemas("refunds.orbit")["workflow.Refund.input"]
    validator = Draft202012Validator(schema)
    messages = [
        e.message for e in validator.iter_errors({"order_id": "A-1", "amount": "12", "note": "x"})
    ]
    assert messages == [
        "'12' is not of type 'number'",
        "Additional properties are not allowed ('note' was unexpected)",
    ]
    assert list(validator.iter_errors({"order_id": "A-1", "amount": 12.5})) == []


BOOK_PAYLOADS = [
    ("workflow.Refund.signal.approval", {"approved": True, "agent": "sam"}),
    (
        "workflow.OrderApproval.signal.review",
        {"approved": False, "reviewer": "kim", "comment": None},
    ),
    ("workflow.Subscription.input", {"customer_id": "c-42", "amount": 9.99}),
    (
        "workflow.OrderProcessing.input",
        {
            "order_id": "A-100",
            "customer_id": "c-1",
            "amount": 250.0,
            "items": [{"sku": "sku-1", "quantity": 2}],
        },
    ),
    ("workflow.Shipment.signal.location", {"place": "Lyon", "eta_hours": 4}),
    ("task.payments.payout.input", {"amount": 12.5, "order_id": "A-1", "extra": "allowed"}),
]


@pytest.mark.parametrize(("name", "payload"), BOOK_PAYLOADS, ids=[p[0] for p in BOOK_PAYLOADS])
def test_example_payloads_are_accepted(book: Path, name: str, payload: Any) -> None:
    validator = Draft202012Validator(schemas(*ALL)[name])
    assert [e.message for e in validator.iter_errors(payload)] == []


INVALID = [
    ("workflow.Refund.signal.approval", {"approved": "yes", "agent": "sam"}),
    ("workflow.Refund.signal.approval", {"agent": "sam"}),
    ("workflow.Subscription.input", {"customer_id": "c-42", "amount": 9.99, "period": 2**63}),
    ("workflow.Subscription.input", {"customer_id": "c-42", "amount": 9.99, "period": 1.5}),
    (
        "workflow.OrderProcessing.input",
        {
            "order_id": "A",
            "customer_id": "c",
            "amount": 1.0,
            "items": [{"sku": "s", "quantity": 1, "x": 1}],
        },
    ),
    ("workflow.OrderApproval.signal.review", {"approved": True, "reviewer": None}),
]


@pytest.mark.parametrize(("name", "payload"), INVALID)
def test_invalid_payloads_are_refused(book: Path, name: str, payload: Any) -> None:
    validator = Draft202012Validator(schemas(*ALL)[name])
    assert list(validator.iter_errors(payload)) != []


def test_the_type_mapping_table(book: Path) -> None:
    Path("types.orbit").write_text(
        "schema Point { x: Int, y: Int = 0 }\n"
        "workflow Types {\n"
        '    version "1.0.0"\n'
        "    input {\n"
        "        s: String\n        i: Int\n        f: Float\n        b: Bool\n        by: Bytes\n"
        "        d: Duration\n        t: Timestamp\n        u: UUID\n        j: JSON\n"
        "        l: List<String>\n        m: Map<String, Float>\n        o: Int?\n"
        "        p: Point\n"
        "    }\n"
        "    step s { sleep 1s }\n"
        "}\n",
        encoding="utf-8",
    )
    schema = schemas("types.orbit")["workflow.Types.input"]
    props = schema["properties"]
    int_schema = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
    assert props["s"] == {"type": "string"}
    assert props["i"] == int_schema
    assert props["f"] == {"type": "number"}
    assert props["b"] == {"type": "boolean"}
    assert props["by"] == {"type": "string", "contentEncoding": "base64"}
    assert props["d"] == {"type": "integer", "minimum": 0}
    assert props["t"] == {"type": "string", "format": "date-time"}
    assert props["u"] == {"type": "string", "format": "uuid"}
    assert props["j"] is True
    assert props["l"] == {"type": "array", "items": {"type": "string"}}
    assert props["m"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["o"] == {"anyOf": [int_schema, {"type": "null"}]}
    assert props["p"] == {
        "title": "Point",
        "type": "object",
        "properties": {"x": int_schema, "y": {**int_schema, "default": 0}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert "o" not in schema["required"] and "s" in schema["required"]
    assert schema["additionalProperties"] is False


def test_schema_for_one_workflow_and_its_contracts(book: Path) -> None:
    found = schemas("refunds.orbit", "subscription.orbit", "--workflow", "Refund")
    assert sorted(found) == [
        "task.payments.payout.input",
        "task.payments.payout.output",
        "workflow.Refund.input",
        "workflow.Refund.output",
        "workflow.Refund.signal.approval",
    ]


def test_queries_get_result_schemas(book: Path) -> None:
    found = schemas("subscription.orbit")
    query = found["workflow.Subscription.query.period"]
    assert query["title"] == "Subscription@1.0.0 query period"
    assert set(query["properties"]) == {"period", "of", "charged"}


def test_schema_unknown_workflow(book: Path) -> None:
    result = orbit("schema", "refunds.orbit", "--workflow", "Nope")
    assert result.exit_code == 1
    assert result.stderr == "error: no workflow `Nope`; available: Refund\n"


def test_schema_without_files(book: Path) -> None:
    result = orbit("schema")
    assert result.exit_code == 1
    assert result.stderr == "error: no input files\n"


def test_schema_output_is_deterministic(book: Path) -> None:
    assert orbit("schema", *ALL).stdout == orbit("schema", *ALL).stdout


def test_doc_comment_rules(book: Path) -> None:
    Path("rules.orbit").write_text(
        "//// Four slashes: an ordinary comment.\n"
        "workflow Rules {\n"
        '    version "1.0.0"\n'
        "    input {\n"
        "        /// Kept.\n"
        "        kept: String\n"
        "        /// Cut off by the blank line.\n"
        "\n"
        "        blank: String\n"
        "        /// Cut off by an ordinary comment.\n"
        "        // ordinary\n"
        "        plain: String\n"
        "    }\n"
        "    /// First line\n"
        "    /// second line.\n"
        "    step s { sleep 1s }\n"
        "}\n",
        encoding="utf-8",
    )
    result = orbit("docs", "rules.orbit", "-o", "out")
    assert result.exit_code == 0, result.output
    page = Path("out/Rules.md").read_text()
    assert "Four slashes" not in page
    assert "| `kept` | `String` | yes |  | Kept. |" in page
    assert "| `blank` | `String` | yes |  |  |" in page
    assert "| `plain` | `String` | yes |  |  |" in page
    # In a table cell the lines of a doc comment are joined with spaces.
    assert "| First line second line. |" in page


def test_built_in_tasks_a_workflow_uses_are_documented(book: Path) -> None:
    Path("http.orbit").write_text(
        "workflow Fetch {\n"
        '    version "1.0.0"\n'
        "    input { url: String, extra: JSON }\n"
        '    step get { worker "orbit.http.request" with { url: input.url } }\n'
        "}\n",
        encoding="utf-8",
    )
    result = orbit("docs", "http.orbit", "-o", "out")
    assert result.exit_code == 0, result.output
    contracts = Path("out/contracts.md").read_text()
    assert '<a id="task-orbit-http-request"></a>' in contracts
    assert "| Source | built-in |" in contracts
    assert "| `body` | `JSON` | no | `null` |  |" in contracts
    # A JSON field may be left out, as in the schema and the runtime.
    assert "| `extra` | `JSON` | no |  |  |" in Path("out/Fetch.md").read_text()
    assert "task.orbit.http.request.input" in schemas("http.orbit")


def test_docs_page_with_handlers_events_children_and_queries(book: Path, golden: Golden) -> None:
    result = orbit("docs", "labels.orbit", "approval.orbit", "-o", "out")
    assert result.exit_code == 0, result.output
    golden("docs_labels_Labels_md", Path("out/Labels.md").read_text())
    golden("docs_approval_OrderApproval_md", Path("out/OrderApproval.md").read_text())
    golden("docs_labels_index_md", Path("out/index.md").read_text())


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_docs_output_is_the_same_every_time(book: Path, fmt: str) -> None:
    """What the chapter's CI recipe relies on: regenerate, then `git diff --exit-code`."""
    for out in ("one", "two"):
        assert orbit("docs", *ALL, "-o", out, "--format", fmt, "--json-schema").exit_code == 0
    one = {p.relative_to("one"): p.read_bytes() for p in Path("one").rglob("*") if p.is_file()}
    two = {p.relative_to("two"): p.read_bytes() for p in Path("two").rglob("*") if p.is_file()}
    assert one == two


def test_docs_lists_the_search_fields(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "visibility.orbit"
    result = orbit("docs", str(example), "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    page = (tmp_path / "out" / "Orders.md").read_text(encoding="utf-8")
    assert (
        "## Search fields\n\nFilter executions by these with `orbit ps --where`.\n\n"
        "| Field | Type | Expression |\n|---|---|---|\n"
        "| `customer` | `String` | `input.customer` |\n"
        "| `amount` | `Float` | `input.amount` |\n"
    ) in page
