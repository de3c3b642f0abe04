"""Process-wide settings for a process that compiles, made once at start-up.

Both are process-wide, which is why parsing and compiling do not touch
them per call: `orbit lsp` parses on a thread of its own, and a limit
raised and restored around one parse could be lowered under another
thread still deep in its own.

- The recursion limit (`allow_deep_sources`). The parser (parsimonious'
  packrat matcher), the checker and lowering recurse on the nesting of
  expressions and types, a few dozen Python frames per level, and sources
  may nest 100 levels (`syntax.nesting`): more than Python's default limit
  of 1,000 frames. Without the raised limit nothing breaks: a source nested
  deeper than the default allows is reported as E0100 (too deeply nested),
  as the parser and the compiler turn a RecursionError into it.
- The cyclic collector's thresholds (`tune_for_compiling`). A compile makes
  hundreds of thousands of small acyclic objects, which reference counting
  frees; with the default thresholds the collector walks the live ones
  again and again, about a quarter of a check's CPU time. Collecting young
  objects less often (the thresholds the server uses, orbit_core's
  `tune_process`) costs nothing in correctness: cycles are still collected.
"""

from __future__ import annotations

import gc
import sys

# Room for a few hundred nesting levels.
RECURSION_LIMIT = 20_000
# (young, middle, old) generations: as orbit_core.engine.tuning.
GC_THRESHOLDS = (50_000, 20, 100)


def allow_deep_sources() -> None:
    """Raises the recursion limit to RECURSION_LIMIT; never lowers it."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


def tune_for_compiling() -> None:
    """`allow_deep_sources`, and the collector's thresholds for compiling
    (never lowered): for `orbit` and its language server, at start-up."""
    allow_deep_sources()
    if gc.get_threshold()[0] < GC_THRESHOLDS[0]:
        gc.set_threshold(*GC_THRESHOLDS)
