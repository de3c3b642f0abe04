""" "did you mean ...?" suggestions for misspelt names.

A file can hold thousands of unknown names, each compared with thousands of
candidates, so the comparison is bounded: candidates whose length alone
rules them out are skipped, and the distance stops as soon as it exceeds the
best found so far. Names too long to be typed by hand get no suggestion.
"""

from __future__ import annotations

from collections.abc import Iterable

# Longer names are generated, not misspelt; comparing them costs the product
# of the lengths.
MAX_SUGGESTED_LENGTH = 64


def edit_distance(a: str, b: str, bound: int | None = None) -> int:
    """Optimal string alignment distance: insertions, deletions,
    substitutions and transpositions of neighbours each cost 1.

    With `bound`, any distance above it is returned as `bound + 1`."""
    if bound is not None and abs(len(a) - len(b)) > bound:
        return bound + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        # Every later row is at least the minimum of this one, less one for a
        # transposition that reaches back two rows.
        if bound is not None and min(current) > bound and min(previous) > bound:
            return bound + 1
        previous2, previous = previous, current
    distance = previous[len(b)]
    return distance if bound is None else min(distance, bound + 1)


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate nearest to `name`, if it is close enough to be a typo.

    Close enough means at most one edit per three characters (at least one);
    ties go to the candidate listed first.
    """
    if len(name) > MAX_SUGGESTED_LENGTH:
        return None
    limit = max(1, len(name) // 3)
    best: str | None = None
    best_distance = limit + 1
    for candidate in candidates:
        if candidate == name or abs(len(candidate) - len(name)) >= best_distance:
            continue
        distance = edit_distance(name, candidate, best_distance - 1)
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best
