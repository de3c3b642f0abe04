""" "did you mean ...?" suggestions for misspelt names."""

from __future__ import annotations

from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions,
    substitutions and transpositions of neighbours each cost 1."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[len(b)]


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate nearest to `name`, if it is close enough to be a typo.

    Close enough means at most one edit per three characters (at least one);
    ties go to the candidate listed first.
    """
    limit = max(1, len(name) // 3)
    best: str | None = None
    best_distance = limit + 1
    for candidate in candidates:
        if candidate == name:
            continue
        distance = edit_distance(name, candidate)
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best
