"""The fault campaign, short: 30 seconds of load and faults in each
cluster mode, judged by the history checker. It runs in the `postgres`
nox session (noxfile.py's CLUSTER_TESTS); `nox -s faults` runs it long."""

from __future__ import annotations

import os
from pathlib import Path

import campaign
import pgkit
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
SECONDS = float(os.environ.get("ORBIT_FAULTS_SECONDS", "30"))


@pytest.mark.timeout(420)
@pytest.mark.parametrize("mode", ["standby", "shared"])
def test_a_short_fault_campaign_finds_no_violation(mode: str, tmp_path: Path) -> None:
    try:
        pgkit.bin_dir()
    except pgkit.Unavailable as exc:
        pgkit.unavailable(str(exc))
    result = campaign.run(mode, SECONDS, seed=11, out=tmp_path, every_s=3.0)
    assert result["violations"] == 0, (tmp_path / "violations.txt").read_text()
    assert result["operations"] > 20 and sum(result["faults_injected"].values()) >= 3, result
    assert result["executions"] > 0 and set(result["final_status"]) <= {"COMPLETED", "CANCELLED"}


def test_the_fault_schedule_is_seeded() -> None:
    first = campaign.schedule(5, 300, 6.0)
    assert first == campaign.schedule(5, 300, 6.0)
    assert first != campaign.schedule(6, 300, 6.0)
    assert all(3 < f.at_s < 297 for f in first)
    assert {f.fault for f in first} == set(campaign.FAULTS)
