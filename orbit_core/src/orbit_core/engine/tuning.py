"""Process-wide CPython settings for a long-running engine process."""

from __future__ import annotations

import gc
import sys


def tune_process() -> None:
    """Configures CPython for a long-running engine process (the server and
    the benchmarks call it once at startup). It changes process-wide settings,
    which is why the engine does not do it by itself.

    - The cyclic garbage collector collects young objects less often. The
      engine keeps every active execution in memory as many small, long-lived
      objects, and with the default thresholds the collector rescans them ever
      more often as their number grows, so the cost of a step would grow with
      the number of executions in flight.
    - The interpreter switches threads every millisecond instead of every five.
      A group's leader gives up the GIL while the database writes; a shorter
      interval lets it take the GIL back sooner from the other threads to
      answer the waiting callers, which shortens every group commit.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    sys.setswitchinterval(0.001)
