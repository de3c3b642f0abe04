"""The book's whole programs, as the repository's extracted examples list them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BOOK = Path(__file__).resolve().parents[2] / "tests" / "book"


def book_programs() -> list[dict[str, Any]]:
    """The manifest entries of the book's whole programs (each `source` is
    relative to BOOK); none when the extracted examples are not at hand, as in
    a checkout of this package alone."""
    manifest = BOOK / "manifest.json"
    if not manifest.exists():
        return []
    entries: list[dict[str, Any]] = json.loads(manifest.read_text(encoding="utf-8"))
    return [entry for entry in entries if entry["kind"] == "program"]
