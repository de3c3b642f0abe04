"""A fixed fault schedule for shared mode that made issue 40's stale copy
of a lost execution (docs/reliability.md, "Found and fixed"): three times
in 40 s of load, server a's link to PostgreSQL is slowed past the node
timeout for 6 s (so b takes a's executions over while a still holds them)
and PostgreSQL restarts 4 s into it (so a's rounds and commits fail).

    PYTHONPATH=tests:tests/faults python tests/faults/scenario_stale_copy.py \
        build/faults/stale-copy [seconds of delay per chunk, default 1.2]

On the code before the fix one run in four had violations; it is not part
of the test suite (the regression tests are in tests/test_cluster_shared.py
and the shared simulation's pinned seeds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import campaign
import fault_proxy

LOAD_S = 40.0


def plan() -> list[campaign.Fault]:
    faults = []
    for k in range(3):
        base = 4.0 + 12.0 * k
        faults += [
            campaign.Fault(base, "db-delay", "a", 6.0),
            campaign.Fault(base + 4.0, "pg-restart-fast", "pg", 1.0),
        ]
    return faults


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("build/faults/stale-copy")
    slow = float(argv[1]) if len(argv) > 1 else 1.2
    campaign.schedule = lambda seed, seconds, every_s: plan()
    delay = fault_proxy.FaultProxy.delay

    def fixed(proxy: fault_proxy.FaultProxy, seconds: float) -> None:
        delay(proxy, slow)

    fault_proxy.FaultProxy.delay = fixed  # type: ignore[method-assign,assignment]
    result = campaign.run("shared", LOAD_S, seed=11, out=out, every_s=3.0)
    print(result["violations"], "violations;", result["faults_injected"], flush=True)
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
