"""Fixtures of the web UI's browser tests: Debian's Chromium, headless,
driven by Playwright, against a real `orbit server` (tests/e2e's processes).

Chromium comes from scripts/install-chromium (Debian's package), never from
Playwright's own browser download. Screenshots go to build/ui-screenshots/
at the repository root (`SHOTS`), kept after the run as the test artifacts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = REPO / "build" / "ui-screenshots"


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        subprocess.run([str(REPO / "scripts" / "install-chromium")], check=True)
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (scripts/install-chromium could not install it)")
    return CHROMIUM


@pytest.fixture(scope="session")
def browser(chromium_path: Path) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(chromium_path), headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def shots() -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (its own context) at the size the screenshots use; the
    test fails when the page raised a JavaScript error meanwhile."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, errors
