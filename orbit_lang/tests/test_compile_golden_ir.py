"""Golden IR documents: the compiled form of some of the book's workflows.

data/ir/*.orbit are the sources; data/ir/expected/<Workflow>.json the exact
documents `orbit compile` writes, and data/ir/expected/hashes.json their
definition hashes. Any byte change fails: an `orbit-ir/1` hash must never
change across releases (RULINGS §11), and an `orbit-ir/2` one only with a
deliberate, reviewed change. Run with UPDATE_GOLDEN=1 to rewrite them, then
review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orbit_core.ir import IR_V1, IR_V2, definition_hash, from_json, to_json
from orbit_lang import compile_paths

DATA = Path(__file__).parent / "data" / "ir"
EXPECTED = DATA / "expected"
UPDATE = bool(os.environ.get("UPDATE_GOLDEN"))
ROOTS = [
    "hello.orbit",
    "order_processing.orbit",
    "fulfilment.orbit",
    "approval.orbit",
    "checkout.orbit",
    "shipment.orbit",
    "subscription.orbit",
]
IR_VERSIONS = {
    "Hello": IR_V1,
    "OrderProcessing": IR_V1,
    "Shipping": IR_V1,
    "Fulfilment": IR_V1,
    "OrderApproval": IR_V2,
    "Checkout": IR_V2,
    "Shipment": IR_V2,
    "Subscription": IR_V2,
}


def _document(text: str) -> str:
    return json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"


def _compiled(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(DATA)
    documents: dict[str, str] = {}
    for root in ROOTS:
        result = compile_paths([Path(root)])
        assert result.ok, [d.message for d in result.diagnostics]
        for definition in result.definitions:
            documents[definition.name] = (
                json.dumps(to_json(definition), indent=2, ensure_ascii=False) + "\n"
            )
    return documents


def test_golden_documents_and_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    documents = _compiled(monkeypatch)
    assert set(documents) == set(IR_VERSIONS)
    hashes = {name: json.loads(text)["definition_hash"] for name, text in documents.items()}
    if UPDATE:
        EXPECTED.mkdir(exist_ok=True)
        for name, text in documents.items():
            (EXPECTED / f"{name}.json").write_text(text, encoding="utf-8")
        (EXPECTED / "hashes.json").write_text(
            json.dumps(dict(sorted(hashes.items())), indent=2) + "\n", encoding="utf-8"
        )
    pinned = json.loads((EXPECTED / "hashes.json").read_text(encoding="utf-8"))
    assert hashes == pinned
    for name, text in documents.items():
        assert text == (EXPECTED / f"{name}.json").read_text(encoding="utf-8"), name


@pytest.mark.parametrize("name", sorted(IR_VERSIONS))
def test_golden_documents_validate(name: str) -> None:
    document = json.loads((EXPECTED / f"{name}.json").read_text(encoding="utf-8"))
    definition = from_json(document)
    assert definition.ir_version == IR_VERSIONS[name]
    assert definition_hash(definition) == document["definition_hash"]
    # Reading and writing a document gives it back unchanged.
    assert _document(json.dumps(to_json(definition))) == _document(json.dumps(document))
