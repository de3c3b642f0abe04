"""ports.UuidIds: the default ids are random RFC 4122 version 4 UUIDs."""

from __future__ import annotations

import uuid

from orbit_core.ports import UuidIds


def test_every_id_is_a_canonical_random_uuid() -> None:
    ids = UuidIds()
    made = [make() for make in (ids.token, ids.execution_id, ids.session_id) for _ in range(300)]
    for text in made:
        parsed = uuid.UUID(text)
        assert str(parsed) == text  # lower-case, hyphenated
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert len(set(made)) == len(made)
    # Every variant digit turns up (8, 9, a, b): all four come from the random bits.
    assert {text[19] for text in made} == set("89ab")
