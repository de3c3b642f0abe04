"""The catalog's highest version of each name, kept up to date as plans
are added one at a time (recovery adds every stored definition), agrees
with a scan of every plan of the name after any sequence of adds,
replacements and removals (a rolled-back deploy), ties included: versions
that differ only in build metadata order alike, and the one added first
wins, as `max` over the catalog in insertion order does."""

from __future__ import annotations

import attrs
from engine_kit import plain
from hypothesis import given, settings
from hypothesis import strategies as st

from orbit_core.engine.catalog import Catalog
from orbit_core.plan import Plan
from orbit_core.semver import semver_key

VERSIONS = ["1.0.0", "1.0.0+b1", "1.0.0+b2", "1.2.0-rc.1", "1.2.0", "0.9.9", "2.0.0", "draft"]
_BASE = plain()


def _plan(name: str, version: str, variant: int) -> Plan:
    # The hash only has to tell definitions apart here (nothing checks it).
    defn = attrs.evolve(
        _BASE, name=name, version=version, definition_hash=f"{name}@{version}#{variant}"
    )
    return Plan(defn)


def _scanned(catalog: Catalog, name: str) -> Plan | None:
    plans = [p for (n, _v), p in catalog._plans.items() if n == name]
    return max(plans, key=lambda p: semver_key(p.defn.version)) if plans else None


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "remove"]),
        st.sampled_from(["A", "B"]),
        st.sampled_from(VERSIONS),
        st.integers(0, 2),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_the_latest_version_is_the_highest_of_every_plan_of_the_name(
    steps: list[tuple[str, str, str, int]],
) -> None:
    catalog = Catalog()
    for op, name, version, variant in steps:
        if op == "add":
            catalog.add(_plan(name, version, variant))
        else:
            plan = catalog._plans.get((name, version))
            if plan is not None:
                catalog.remove(plan)
        for n in ("A", "B"):
            assert catalog._latest.get(n) is _scanned(catalog, n), (n, steps)
