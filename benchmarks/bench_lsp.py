"""`orbit lsp` latency: `python benchmarks/bench_lsp.py [--lines N] [--repeat R]`.

Starts `orbit lsp` as an editor does and drives it with a real LSP client
(pygls's, over stdio) on the generated program of bench_check (2,000 lines
by default), then reports the median of R runs of:

- diagnostics after a one-character edit (a character typed into a string
  in the middle of the file): from sending `didChange` to the `publishDiagnostics` that
  follows it (target: under 150 ms);
- completion after `.`: the document gains `input.` inside a workflow and
  the completion request is answered (target: under 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
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


async def measure(text: str, repeat: int) -> tuple[list[float], list[float]]:
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
                seen = session.publications
                start = time.perf_counter()
                session.change(target, edited)
                await session.wait_publication(seen)
                diagnostics.append((time.perf_counter() - start) * 1000)
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
        return diagnostics, completions
    finally:
        await session.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    text = bench_check.generate(args.lines)
    diagnostics, completions = asyncio.run(measure(text, args.repeat))
    for name, values, target in (
        ("diagnostics after a one-character edit", diagnostics, DIAGNOSTICS_TARGET_MS),
        ("completion after `.`", completions, COMPLETION_TARGET_MS),
    ):
        median = statistics.median(values)
        verdict = "ok" if median < target else "over target"
        print(
            f"{name} ({args.lines} lines): median {median:.1f} ms, "
            f"min {min(values):.1f} ms, max {max(values):.1f} ms "
            f"(target < {target:.0f} ms: {verdict})"
        )


if __name__ == "__main__":
    main()
