"""The history events' JSON: one list of event classes, and a member that
`to_json` always writes is required when reading (issue 37)."""

from __future__ import annotations

import typing

import pytest

from orbit_core import events as ev


def test_every_event_class_of_the_union_is_read_by_its_type() -> None:
    assert set(ev.EVENT_TYPES.values()) == set(typing.get_args(ev.Event))
    assert all(name == cls.TYPE for name, cls in ev.EVENT_TYPES.items())


def test_a_missing_member_is_refused_not_read_as_none() -> None:
    event = ev.StepDispatched(3, 1000, "s0", 1, "tok-1", "w-1", "session-1", None)
    document = ev.to_json(event)
    assert ev.from_json(document) == event
    del document["token"]
    with pytest.raises(KeyError, match="StepDispatched event without `token`"):
        ev.from_json(document)


def test_members_written_only_when_set_may_be_missing() -> None:
    created = ev.WorkflowCreated(1, 1000, "Wf", "1.0.0", "sha256:x", {})
    document = ev.to_json(created)
    assert "parent" not in document and "schedule_id" not in document
    assert ev.from_json(document) == created
