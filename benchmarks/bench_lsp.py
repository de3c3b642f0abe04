"""`orbit lsp` latency: `python benchmarks/bench_lsp.py [--lines N] [--repeat R]`.

Starts `orbit lsp` as an editor does and drives it with a real LSP client
(pygls's, over stdio) on the generated program of bench_check (2,000 lines
by default), then reports the median and 95th percentile of R runs of:

- diagnostics after a one-character edit (a character typed into a string
  in the middle of the file): from sending `didChange` to the
  `publishDiagnostics` that carries the edited document's version, so the
  answer to that very edit is timed (target: under 150 ms);
- the same after a character that breaks the syntax in the middle of the
  file (a `.` with nothing after it), for information: no target;
- completion after `.`: the document gains `input.` inside a workflow and
  the completion request is answered (target: under 50 ms).

The server is a fresh process; the first analysis (the whole file) is not
timed, as an editor does it when the file is opened.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bench_check
from lsprotocol import types as lsp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "orbit_cli" / "tests"))
from lsp_client import Session

DIAGNOSTICS_TARGET_MS = 150.0
COMPLETION_TARGET_MS = 50.0


async def _diagnosed(session: Session, target: str, text: str) -> float:
    """Milliseconds from sending `text` to the diagnostics of that version."""
    start = time.perf_counter()
    session.change(target, text)
    await session.wait_version(target, session.versions[target], timeout=120)
    return (time.perf_counter() - start) * 1000


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


async def measure(text: str, repeat: int) -> tuple[list[float], list[float], list[float]]:
    session = Session()
    await session.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "big.orbit"
            path.write_text(text)
            target = session.open(path)
            await session.wait_diagnostics(target, timeout=120)
            # The edits: a word typed into a string in the middle of the
            # file, one character at a time, so every text is new to the
            # server (nothing is answered from a cache of whole files).
            middle = text.index('version "1.0.0"', len(text) // 2) + len('version "1.0.0')
            diagnostics = []
            for i in range(repeat):
                edited = text[:middle] + "-rc" + "x" * (i + 1) + text[middle:]
                diagnostics.append(await _diagnosed(session, target, edited))
            # A `.` after an expression, then spaces: each text new, none parses.
            site = text.index("count: len(input.lines)", len(text) // 2)
            site += len("count: len(input.lines)")
            broken = []
            for i in range(repeat):
                edited = text[:site] + "." + " " * i + text[site:]
                broken.append(await _diagnosed(session, target, edited))
            await _diagnosed(session, target, text)
            # Completion: `input.` typed where an expression goes.
            site = text.index("count: len(input.lines)")
            completions = []
            for _ in range(repeat):
                edited = (
                    text[:site] + "count: input." + text[site + len("count: len(input.lines)") :]
                )
                session.change(target, edited)
                offset = site + len("count: input.")
                line = edited.count("\n", 0, offset)
                column = offset - (edited.rfind("\n", 0, offset) + 1)
                start = time.perf_counter()
                answer = await session.client.text_document_completion_async(
                    lsp.CompletionParams(
                        text_document=lsp.TextDocumentIdentifier(uri=target),
                        position=lsp.Position(line=line, character=column),
                    )
                )
                completions.append((time.perf_counter() - start) * 1000)
                assert answer is not None
                items = answer.items if isinstance(answer, lsp.CompletionList) else answer
                assert {"order_id", "lines", "coupon"} <= {item.label for item in items}
                session.change(target, text)
        return diagnostics, broken, completions
    finally:
        await session.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    text = bench_check.generate(args.lines)
    diagnostics, broken, completions = asyncio.run(measure(text, args.repeat))
    for name, values, target in (
        ("diagnostics after a one-character edit", diagnostics, DIAGNOSTICS_TARGET_MS),
        ("diagnostics after a character that breaks the syntax", broken, None),
        ("completion after `.`", completions, COMPLETION_TARGET_MS),
    ):
        median = statistics.median(values)
        verdict = ""
        if target is not None:
            verdict = f" (target < {target:.0f} ms: {'ok' if median < target else 'over target'})"
        print(
            f"{name} ({args.lines} lines): median {median:.1f} ms, "
            f"p95 {percentile(values, 0.95):.1f} ms, min {min(values):.1f} ms, "
            f"max {max(values):.1f} ms{verdict}"
        )


if __name__ == "__main__":
    main()
