"""`orbit graph` (chapter 55): every transcript of the chapter as a golden
file (compared with definition hashes masked, as in test_cli_goldens), the
SVG rendering as a golden and as well-formed XML, and the errors of chapter
66 with their exit codes.

The workflows are the book's example files, copied into fixtures/graphs
(shipment.orbit with the `limits` block the chapter's DOT transcript shows).
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orbit_cli.main import cli
from orbit_core.ir import to_json

# The golden fixture of conftest.py: (name, actual text).
Golden = Callable[[str, str], None]
FIXTURES = Path(__file__).parent / "fixtures" / "graphs"


@pytest.fixture
def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the example files, as the current directory."""
    root = tmp_path / "examples"
    shutil.copytree(FIXTURES, root)
    monkeypatch.chdir(root)
    return root


def orbit(*args: str) -> Result:
    return CliRunner(env={"NO_COLOR": "1"}).invoke(cli, list(args), catch_exceptions=False)


TRANSCRIPTS = [
    ("graph_subscription", ["subscription.orbit"]),
    ("graph_subscription_dot", ["subscription.orbit", "--format", "dot"]),
    ("graph_subscription_sequence", ["subscription.orbit", "--sequence"]),
    ("graph_checkout", ["checkout.orbit"]),
    ("graph_order_processing", ["order_processing.orbit"]),
    ("graph_fulfilment", ["fulfilment.orbit", "--workflow", "Fulfilment"]),
    ("graph_shipment_dot", ["shipment.orbit", "--format", "dot"]),
    ("graph_approval_sequence", ["approval.orbit", "--sequence"]),
    ("graph_refund", ["refunds.orbit"]),
    # Beyond the chapter's transcripts: the other formats of the same examples.
    ("graph_checkout_dot", ["checkout.orbit", "--format", "dot"]),
    ("graph_checkout_sequence", ["checkout.orbit", "--sequence"]),
    ("graph_order_processing_dot", ["order_processing.orbit", "--format", "dot"]),
    ("graph_shipment_sequence", ["shipment.orbit", "--sequence"]),
    ("graph_fulfilment_sequence", ["fulfilment.orbit", "--sequence"]),
    ("graph_labels", ["labels.orbit"]),
    ("graph_labels_dot", ["labels.orbit", "--format", "dot"]),
    ("graph_labels_sequence", ["labels.orbit", "--sequence"]),
    ("graph_loop", ["loop.orbit"]),
    ("graph_loop_sequence", ["loop.orbit", "--sequence"]),
    ("graph_loop_svg", ["loop.orbit", "--format", "svg"]),
    ("graph_subscription_svg", ["subscription.orbit", "--format", "svg"]),
    ("graph_checkout_svg", ["checkout.orbit", "--format", "svg"]),
    ("graph_order_processing_svg", ["order_processing.orbit", "--format", "svg"]),
    ("graph_shipment_svg", ["shipment.orbit", "--format", "svg"]),
]


@pytest.mark.parametrize(("name", "args"), TRANSCRIPTS, ids=[t[0] for t in TRANSCRIPTS])
def test_the_chapter_transcripts(book: Path, golden: Golden, name: str, args: list[str]) -> None:
    result = orbit("graph", *args)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    golden(name, result.stdout)


@pytest.mark.parametrize("fmt", ["mermaid", "dot", "svg"])
def test_output_is_the_same_every_time(book: Path, fmt: str) -> None:
    first = orbit("graph", "order_processing.orbit", "--format", fmt).stdout
    assert orbit("graph", "order_processing.orbit", "--format", fmt).stdout == first


@pytest.mark.parametrize("name", ["subscription", "checkout", "shipment", "approval"])
def test_svg_is_standalone_well_formed_xml(book: Path, name: str) -> None:
    text = orbit("graph", f"{name}.orbit", "--format", "svg").stdout
    root = ET.fromstring(text.encode())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    # Nothing loaded from elsewhere: no links, images or external stylesheets.
    assert "href" not in text and "<image" not in text and "@import" not in text
    assert "prefers-color-scheme" in text


def test_svg_draws_continue_as_new_below_the_final_steps(book: Path) -> None:
    text = orbit("graph", "subscription.orbit", "--format", "svg").stdout
    ns = {"s": "http://www.w3.org/2000/svg"}
    root = ET.fromstring(text.encode())
    boxes: dict[str, float] = {}
    for g in root.iter("{http://www.w3.org/2000/svg}g"):
        rect = g.find("s:rect", ns)
        node_id = g.get("id")
        if node_id and rect is not None:
            boxes[node_id] = float(rect.get("y", "0"))
    assert boxes["charge"] < boxes["receipt"] < boxes["next_period"] < boxes["continue_as_new"]
    can = next(
        g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("id") == "continue_as_new"
    )
    assert len(can.findall("s:rect", ns)) == 2  # the double border
    assert "next run" in text


def test_svg_puts_a_compensation_right_of_its_step_and_handlers_in_panels(book: Path) -> None:
    text = orbit("graph", "checkout.orbit", "--format", "svg").stdout
    root = ET.fromstring(text.encode())
    rects = {
        g.get("id"): g.find("{http://www.w3.org/2000/svg}rect")
        for g in root.iter("{http://www.w3.org/2000/svg}g")
        if g.get("id")
    }
    step, undo = rects["reserve"], rects["reserve__undo"]
    assert step is not None and undo is not None
    assert float(undo.get("x", 0)) > float(step.get("x", 0))
    assert undo.get("y") == step.get("y")
    assert {"on_failure", "on_cancel"} <= set(rects)
    assert "on_failure__tell_customer" in rects


def test_a_compiled_ir_file_renders_like_its_source(book: Path) -> None:
    from orbit_lang import compile_paths

    definition = compile_paths(["subscription.orbit"]).definitions[0]
    Path("subscription.json").write_text(json.dumps(to_json(definition)), encoding="utf-8")
    assert orbit("graph", "subscription.json").stdout == orbit("graph", "subscription.orbit").stdout


def test_output_file_is_written_with_its_folders(book: Path) -> None:
    result = orbit("graph", "subscription.orbit", "--format", "dot", "-o", "out/deep/sub.dot")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == "wrote out/deep/sub.dot\n"
    assert Path("out/deep/sub.dot").read_text().startswith('digraph "Subscription" {')


def test_a_parent_file_renders_the_parent(book: Path) -> None:
    assert (
        orbit("graph", "fulfilment.orbit").stdout
        == orbit("graph", "fulfilment.orbit", "--workflow", "Fulfilment").stdout
    )


def test_unknown_workflow_lists_the_available_ones(book: Path, golden: Golden) -> None:
    result = orbit("graph", "fulfilment.orbit", "--workflow", "Nope")
    assert result.exit_code == 1
    assert result.stdout == ""
    golden("graph_unknown_workflow", result.stderr)


def test_unrelated_workflows_ask_for_a_choice(book: Path) -> None:
    Path("two.orbit").write_text(
        'workflow A { version "1.0.0" step s { sleep 1s } }\n'
        'workflow B { version "1.0.0" step s { sleep 1s } }\n',
        encoding="utf-8",
    )
    result = orbit("graph", "two.orbit")
    assert result.exit_code == 1
    assert "several unrelated workflows (A, B)" in result.stderr
    assert "--workflow" in result.stderr


@pytest.mark.parametrize("fmt", ["dot", "svg"])
def test_sequence_only_with_mermaid(book: Path, fmt: str) -> None:
    result = orbit("graph", "subscription.orbit", "--sequence", "--format", fmt)
    assert result.exit_code == 1
    assert (
        result.stderr == f"error: --sequence works only with --format mermaid, not --format {fmt}\n"
    )


def test_compile_errors_are_reported_as_by_check(book: Path) -> None:
    Path("bad.orbit").write_text(
        'workflow Bad {\n    version "1.0.0"\n    step s { worker "nope.task" }\n}\n',
        encoding="utf-8",
    )
    result = orbit("graph", "bad.orbit")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "bad.orbit:3:" in result.stderr
    assert orbit("check", "bad.orbit").stderr == result.stderr


def test_an_unwritable_output_is_a_clear_error(book: Path) -> None:
    Path("taken").write_text("a file, not a folder", encoding="utf-8")
    result = orbit("graph", "subscription.orbit", "-o", "taken/sub.mmd")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot write taken/sub.mmd: ")


def test_bad_format_is_a_usage_error(book: Path) -> None:
    result = orbit("graph", "subscription.orbit", "--format", "png")
    assert result.exit_code == 2


def test_mermaid_labels_escape_what_mermaid_reads(book: Path) -> None:
    Path("odd.orbit").write_text(
        'workflow Odd {\n    version "1.0.0"\n    input { n: Int }\n'
        "    step a { compute input.n }\n"
        '    step b { sleep 1s when a > 1 && "#\\"x" != "<y>" }\n}\n',
        encoding="utf-8",
    )
    result = orbit("graph", "odd.orbit")
    assert result.exit_code == 0, result.output
    label = next(line for line in result.stdout.splitlines() if line.strip().startswith("b{{"))
    assert "#gt; 1" in label and "#35;" in label and "#quot;" in label and "#lt;y#gt;" in label
    dot = orbit("graph", "odd.orbit", "--format", "dot").stdout
    assert '\\"#\\\\\\"x\\"' in dot


def test_a_step_named_end_does_not_end_the_mermaid_diagram(book: Path) -> None:
    Path("ends.orbit").write_text(
        'workflow Ends {\n    version "1.0.0"\n    step end { sleep 1s }\n'
        "    step after_end { sleep 1s after end }\n}\n",
        encoding="utf-8",
    )
    lines = orbit("graph", "ends.orbit").stdout.splitlines()
    assert '    end__["end<br/><small>sleep 1s</small>"]' in lines
    assert "    end__ --> after_end" in lines
    assert not any(line.split("[")[0].split()[:1] == ["end"] for line in lines)
