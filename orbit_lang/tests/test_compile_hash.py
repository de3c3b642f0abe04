"""What the definition hash covers (chapter 29, RULINGS §11).

Formatting, comments, doc comments, tests and where declarations live never
change a hash; anything the runtime would execute differently does,
including the order of independent steps, the contracts a workflow calls
and the children it starts.
"""

from __future__ import annotations

from pathlib import Path

from orbit_lang import compile_paths, compile_source

BASE = """\
/// Shared by every order.
schema Line {
    sku: String
    quantity: Int = 1
}

task "stock.reserve" {
    version "1.0.0"
    input { order_id: String, lines: List<Line> }
    output { reservation_id: String }
    compensated_by "stock.release"
}

task "stock.release" {
    version "1.0.0"
    input { reservation_id: String }
    output { released: Bool }
}

task "mail.send" {
    version "1.0.0"
    input { to: String }
    output { sent: Bool }
}

workflow Notice {
    version "1.0.0"
    input { to: String }
    step send { worker "mail.send" with { to: input.to } }
    return { sent: send.sent }
}

/// Reserves stock and tells the customer.
workflow Order {
    version "1.0.0"
    input { order_id: String, lines: List<Line>, email: String }

    // Reserve first.
    step reserve {
        worker "stock.reserve"
        with { order_id: input.order_id, lines: input.lines }
        compensate {
            worker "stock.release"
            with { reservation_id: reserve.reservation_id }
        }
    }

    /// Independent of the reservation.
    step greet { worker "mail.send" with { to: input.email } }

    step notice { workflow "Notice" with { to: input.email } after reserve }

    return { reservation: reserve.reservation_id, greeted: greet.sent }
}
"""


def _hashes(text: str) -> dict[str, str]:
    result = compile_source(text, "order.orbit")
    assert result.ok, [d.message for d in result.diagnostics]
    return {d.name: d.definition_hash for d in result.definitions}


def _order_hash(text: str) -> str:
    return _hashes(text)["Order"]


def test_the_hash_is_sha256_of_the_canonical_document() -> None:
    digest = _order_hash(BASE)
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64


def test_reformatting_keeps_the_hash() -> None:
    messy = (
        BASE.replace("    ", "\t  ")
        .replace("version ", "version: ")
        .replace(", ", " ; ")
        .replace("{ to: input.email }", "{to:input.email,}")
    )
    assert messy != BASE
    assert _hashes(messy) == _hashes(BASE)


def test_comments_and_doc_comments_keep_the_hash() -> None:
    edited = (
        BASE.replace("// Reserve first.", "/* reserve before\n   anything else */")
        .replace(
            "/// Shared by every order.", "/// Lines of an order.\n/// Quantities default to 1."
        )
        .replace("/// Independent of the reservation.\n", "")
    )
    assert _hashes(edited) == _hashes(BASE)


def test_tests_keep_the_hash() -> None:
    with_test = BASE + (
        '\ntest "a notice is sent" {\n    workflow Notice\n    input { to: "a@b.c" }\n'
        '    mock "mail.send" returns { sent: true }\n    expect status COMPLETED\n}\n'
    )
    assert _hashes(with_test) == _hashes(BASE)


def test_moving_declarations_between_files_keeps_the_hash(tmp_path: Path) -> None:
    cut = BASE.index('task "mail.send"')
    (tmp_path / "contracts.orbit").write_text(BASE[:cut], encoding="utf-8")
    (tmp_path / "order.orbit").write_text(
        'import "contracts.orbit"\n' + BASE[cut:], encoding="utf-8"
    )
    result = compile_paths([tmp_path / "order.orbit"])
    assert result.ok
    assert {d.name: d.definition_hash for d in result.definitions} == _hashes(BASE)
    # Reordering top-level declarations in one file changes nothing either.
    workflows = BASE.index("workflow Notice")
    assert _hashes(BASE[workflows:] + BASE[:workflows]) == _hashes(BASE)


def test_reordering_independent_steps_changes_the_hash() -> None:
    greet = '    /// Independent of the reservation.\n    step greet { worker "mail.send" with { to: input.email } }\n\n'
    assert greet in BASE
    moved = BASE.replace(greet, "").replace(
        "    // Reserve first.", greet + "    // Reserve first."
    )
    assert _order_hash(moved) != _order_hash(BASE)


def test_semantic_changes_change_the_hash() -> None:
    base = _order_hash(BASE)
    changes = [
        # a step's input
        ("{ to: input.email } }", '{ to: "x" + input.email } }'),
        # a contract the workflow calls, even only its output
        ("output { sent: Bool }", "output { sent: Bool, id: String? }"),
        # a contract's version
        (
            'task "stock.release" {\n    version "1.0.0"',
            'task "stock.release" {\n    version "1.0.1"',
        ),
        # compensated_by
        ('    compensated_by "stock.release"\n', ""),
        # a used schema's name
        ("schema Line {", "schema OrderLine {"),
        # a default value
        ("quantity: Int = 1", "quantity: Int = 2"),
    ]
    for old, new in changes:
        assert old in BASE, old
        text = BASE.replace(old, new)
        if "OrderLine" in new:
            text = text.replace("List<Line>", "List<OrderLine>")
        assert _order_hash(text) != base, (old, new)


def test_a_changed_child_changes_the_parent() -> None:
    changed = BASE.replace("return { sent: send.sent }", "return { sent: send.sent, to: input.to }")
    before, after = _hashes(BASE), _hashes(changed)
    assert before["Notice"] != after["Notice"]
    assert before["Order"] != after["Order"]


def test_the_child_is_pinned_by_hash() -> None:
    result = compile_source(BASE, "order.orbit")
    notice, order = result.definitions
    assert notice.name == "Notice"  # children first
    child = order.contracts["workflow:Notice"]
    assert getattr(child, "definition_hash", None) == notice.definition_hash
