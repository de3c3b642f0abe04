"""Semantic-version ordering, used to find a workflow's latest version."""

from __future__ import annotations


def semver_key(version: str) -> tuple[object, ...]:
    """Orders MAJOR.MINOR.PATCH[-pre][+build]; a release sorts after its pre-releases,
    and a version that is not semver sorts before every one that is."""
    core, _, _build = version.partition("+")
    core, _, pre = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return (0, version)
    pre_key: tuple[object, ...] = (1,)
    if pre:
        pre_key = (0, *((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
    return (1, int(parts[0]), int(parts[1]), int(parts[2]), pre_key)
