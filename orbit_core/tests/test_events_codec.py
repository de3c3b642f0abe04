"""The history events' JSON: one list of event classes, and a member that
`to_json` always writes is required when reading (issue 37)."""

from __future__ import annotations

import typing
from collections.abc import Callable

import attrs
import orjson
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


@pytest.mark.parametrize("cls", [ev.EVENT_TYPES[name] for name in sorted(ev.EVENT_TYPES)])
def test_the_writers_in_line_write_what_the_member_loop_writes(cls: type[ev.Event]) -> None:
    # Every member set (a distinct value each, None for one in two), in the
    # classes' order: the bytes are those the general loop writes.
    fields = [a.name for a in attrs.fields(cls)][2:]
    for skip in (0, 1):
        values = {
            name: None if (i + skip) % 2 else {"member": name} for i, name in enumerate(fields)
        }
        make: Callable[..., ev.Event] = cls
        event = make(7, 1234, **values)
        loop: dict[str, object] = {"seq": 7, "timestamp_ms": 1234, "type": cls.TYPE}
        optional = ev._OPTIONAL_BY_TYPE.get(cls.TYPE, frozenset())
        loop.update({k: v for k, v in values.items() if not (v is None and k in optional)})
        assert orjson.dumps(ev.to_json(event)) == orjson.dumps(loop)
        assert ev.from_json(ev.to_json(event)) == event
