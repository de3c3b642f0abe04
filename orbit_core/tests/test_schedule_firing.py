"""Firing schedules on a simulated clock (chapter 41): execution ids, the
overlap and catch-up policies, a server stopped for several occurrences and
restarted, a crash between a start and the schedule's advance, pause,
resume, trigger, change and delete, retries of failed starts, jitter, and
bad settings that store nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from engine_kit import Int, inp, obj, plain, rec, step, task, workflow

from orbit_core import events as ev
from orbit_core.engine import Engine
from orbit_core.errors import ConflictError, InvalidError, NotFoundError, StorageError
from orbit_core.memory_store import MemoryStore
from orbit_core.ports import ScheduleAdvance, Store
from orbit_core.schedules.times import format_time, parse_time
from orbit_core.testing import SequentialIds, SimulatedClock, run_until_idle, simulated_engine

T0 = "2026-11-15T18:51:00.347Z"


def t(text: str) -> int:
    return parse_time(text)


class World:
    """A store, a clock and ids that outlive the engines of simulated restarts."""

    def __init__(self, store: Store | None = None, **options: Any) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.clock = SimulatedClock(t(T0))
        self.ids = SequentialIds()
        self.options = options
        self.engine = self.boot()

    def boot(self) -> Engine:
        engine = simulated_engine(self.store, self.clock, ids=self.ids, **self.options)
        engine.deploy(plain())
        return engine

    def restart(self, down_until: str | None = None) -> Engine:
        """Stops the engine (keeping the store), lets time pass, starts another."""
        store = self.store
        self.engine.schedules.close()
        self.engine._pipeline.close()  # a crash: the store stays open
        if down_until is not None:
            self.clock.advance_to(t(down_until))
        self.engine = self.boot()
        assert self.engine.store is store
        return self.engine

    def at(self, when: str) -> None:
        self.clock.advance_to(t(when))

    def create(self, **fields: Any) -> dict[str, Any]:
        body = {"schedule_id": "s", "workflow": "Plain", "input": {"n": 1}, **fields}
        return self.engine.schedules.create(body)

    def get(self, sid: str = "s") -> dict[str, Any]:
        return self.engine.schedules.get(sid)

    def executions(self) -> list[str]:
        rows = self.engine.list_executions(limit=1000)["executions"]
        return sorted(r["execution_id"] for r in rows)

    def status(self, execution_id: str) -> str:
        return str(self.engine.get(execution_id)["status"])

    def complete_all(self) -> None:
        self.engine.register_handler("demo.work", "1.0.0", lambda i: {"ok": True})
        self.engine.run_handlers()


@pytest.fixture
def world() -> Iterator[World]:
    w = World()
    yield w
    w.engine.close()


def test_each_occurrence_starts_one_execution_named_after_it(world: World) -> None:
    created = world.create(interval="10s")
    assert created["next_fire_at"] == "2026-11-15T18:51:10Z"
    world.complete_all()
    for second in ("10", "20", "30"):
        world.at(f"2026-11-15T18:51:{second}Z")
    assert world.executions() == [
        "s:2026-11-15T18:51:10Z",
        "s:2026-11-15T18:51:20Z",
        "s:2026-11-15T18:51:30Z",
    ]
    doc = world.get()
    assert (doc["fired"], doc["skipped"], doc["last_fire_at"]) == (3, 0, "2026-11-15T18:51:30Z")
    assert doc["last_execution_id"] == "s:2026-11-15T18:51:30Z"
    assert doc["next_fire_times"][:2] == ["2026-11-15T18:51:40Z", "2026-11-15T18:51:50Z"]
    assert doc["updated_at"] == "2026-11-15T18:51:30.000Z"
    state = world.engine.state("s:2026-11-15T18:51:20Z")
    assert state.schedule_id == "s"
    created_event = world.engine.events("s:2026-11-15T18:51:20Z")[0]
    assert isinstance(created_event, ev.WorkflowCreated) and created_event.schedule_id == "s"
    assert world.engine.health()["schedules_fired"] == 3


def test_run_until_idle_steps_through_the_occurrences(world: World) -> None:
    world.create(interval="1m", end_at="2026-11-15T19:00:00Z")
    world.complete_all()
    run_until_idle(world.engine)
    assert len(world.executions()) == 9  # 18:52 ... 19:00
    doc = world.get()
    assert (doc["fired"], doc["skipped"], doc["next_fire_at"]) == (9, 0, None)
    assert doc["next_fire_times"] == []
    assert all(world.status(e) == "COMPLETED" for e in world.executions())


def test_overlap_skip_starts_nothing_while_the_previous_one_runs(world: World) -> None:
    world.create(interval="10s")
    world.at("2026-11-15T18:51:10Z")
    world.at("2026-11-15T18:51:20Z")
    world.at("2026-11-15T18:51:30Z")
    assert world.executions() == ["s:2026-11-15T18:51:10Z"]
    doc = world.get()
    assert (doc["fired"], doc["skipped"], doc["last_fire_at"]) == (1, 2, "2026-11-15T18:51:30Z")
    assert doc["last_execution_id"] == "s:2026-11-15T18:51:10Z"
    assert world.engine.health()["schedules_skipped_overlap"] == 2
    world.complete_all()
    world.at("2026-11-15T18:51:40Z")
    assert world.executions()[-1] == "s:2026-11-15T18:51:40Z"


def test_overlap_allow_runs_them_side_by_side(world: World) -> None:
    world.create(interval="10s", overlap="allow")
    for second in ("10", "20", "30"):
        world.at(f"2026-11-15T18:51:{second}Z")
    assert [world.status(e) for e in world.executions()] == ["RUNNING"] * 3
    assert world.get()["skipped"] == 0


def test_overlap_cancel_previous_cancels_and_starts_at_once(world: World) -> None:
    world.create(interval="10s", overlap="cancel_previous")
    world.at("2026-11-15T18:51:10Z")
    world.at("2026-11-15T18:51:20Z")
    first, second = world.executions()
    assert world.status(first) == "CANCELLED"
    assert world.status(second) == "RUNNING"
    reasons = [e.reason for e in world.engine.events(first) if isinstance(e, ev.CancelRequested)]
    assert reasons == ["schedule `s`: replaced by the next occurrence (overlap cancel_previous)"]


def test_skip_missed_after_a_server_was_down_for_several_occurrences(world: World) -> None:
    world.create(interval="10m")  # next 19:00
    world.complete_all()
    world.at("2026-11-15T19:00:00Z")
    # Down from 19:05 to 19:35: 19:10, 19:20 and 19:30 pass unseen.
    world.at("2026-11-15T19:05:00Z")
    world.restart(down_until="2026-11-15T19:35:00Z")
    doc = world.get()
    assert world.executions() == ["s:2026-11-15T19:00:00Z"]
    assert (doc["fired"], doc["skipped"]) == (1, 3)
    assert doc["next_fire_at"] == "2026-11-15T19:40:00Z"
    assert doc["last_fire_at"] == "2026-11-15T19:30:00Z"
    assert world.engine.health()["schedules_skipped_missed"] == 3
    world.complete_all()
    world.at("2026-11-15T19:40:00Z")
    assert world.executions()[-1] == "s:2026-11-15T19:40:00Z"


def test_skip_missed_still_starts_an_occurrence_at_most_a_minute_late(world: World) -> None:
    world.create(interval="10m")
    world.restart(down_until="2026-11-15T19:11:00Z")  # 19:00 missed, 19:10 a minute late
    assert world.executions() == ["s:2026-11-15T19:10:00Z"]
    doc = world.get()
    assert (doc["fired"], doc["skipped"]) == (1, 1)


def test_run_once_starts_the_latest_missed_occurrence_however_late() -> None:
    world = World()
    world.clock.advance_to(t("2026-11-15T23:55:00Z"))
    world.create(interval="10m", catchup="run_once")
    world.restart(down_until="2026-11-16T00:35:00Z")
    assert world.executions() == ["s:2026-11-16T00:30:00Z"]
    doc = world.get()
    assert (doc["fired"], doc["skipped"], doc["next_fire_at"]) == (1, 3, "2026-11-16T00:40:00Z")
    world.engine.close()


class DiesBeforeTheAdvance(MemoryStore):
    """The process dies after the start is committed, before the advance."""

    dead = False

    def advance_schedules(self, advances: list[ScheduleAdvance], owner: str) -> list[str]:
        if not self.dead:
            self.dead = True
            raise StorageError("killed")
        return super().advance_schedules(advances, owner)


def test_an_occurrence_repeated_after_a_crash_starts_nothing_new() -> None:
    world = World(DiesBeforeTheAdvance())
    world.create(interval="10s")
    world.at("2026-11-15T18:51:10Z")
    assert world.executions() == ["s:2026-11-15T18:51:10Z"]
    row = world.store.get_schedule("s")
    assert row is not None and row.claimed_by is not None and row.fired == 0
    world.restart(down_until="2026-11-15T18:51:12Z")
    assert world.executions() == ["s:2026-11-15T18:51:10Z"]
    doc = world.get()
    assert (doc["fired"], doc["skipped"], doc["next_fire_at"]) == (1, 0, "2026-11-15T18:51:20Z")
    health = world.engine.health()
    assert (health["started"], health["schedules_fired"]) == (0, 0)  # the repeat created nothing
    world.engine.close()


def test_an_occurrence_started_before_a_crash_counts_as_fired_when_later_ones_are_due() -> None:
    # Down past the next occurrence: the catch-up sees two due, starts the
    # latest, and must count the earlier one as fired (its execution exists),
    # not as missed, so `fired` equals the executions the schedule started.
    world = World(DiesBeforeTheAdvance())
    world.create(interval="10s")
    world.at("2026-11-15T18:51:10Z")
    world.restart(down_until="2026-11-15T18:51:21Z")
    assert world.executions() == ["s:2026-11-15T18:51:10Z", "s:2026-11-15T18:51:20Z"]
    doc = world.get()
    assert (doc["fired"], doc["skipped"]) == (2, 0)
    assert doc["last_execution_id"] == "s:2026-11-15T18:51:20Z"
    world.engine.close()


def test_an_occurrence_started_before_a_crash_counts_as_fired_when_the_latest_is_missed() -> None:
    # Down for long enough that the latest occurrence is too late to start.
    world = World(DiesBeforeTheAdvance())
    world.create(interval="10m")
    world.at("2026-11-15T19:00:00Z")
    world.restart(down_until="2026-11-15T19:12:00Z")
    assert world.executions() == ["s:2026-11-15T19:00:00Z"]
    doc = world.get()
    assert (doc["fired"], doc["skipped"]) == (1, 1)
    assert doc["last_execution_id"] == "s:2026-11-15T19:00:00Z"
    world.engine.close()


def test_a_failed_start_is_retried_every_five_seconds_with_the_error_shown() -> None:
    world = World(max_active_executions=1)
    world.engine.start("Plain", input={"n": 0}, execution_id="busy")
    world.create(interval="1m")
    world.at("2026-11-15T18:52:00Z")
    doc = world.get()
    assert doc["last_error"] == (
        "RESOURCE_EXHAUSTED: 1 executions are already running (--max-active-executions)"
    )
    assert doc["next_fire_at"] == "2026-11-15T18:52:05Z"
    assert doc["next_fire_times"][0] == "2026-11-15T18:52:00Z"
    assert (doc["fired"], doc["skipped"]) == (0, 0)
    world.complete_all()
    world.at("2026-11-15T18:52:05Z")
    doc = world.get()
    assert world.executions() == ["busy", "s:2026-11-15T18:52:00Z"]
    assert (doc["fired"], doc["last_error"], doc["next_fire_at"]) == (
        1,
        None,
        "2026-11-15T18:53:00Z",
    )
    world.engine.close()


def test_a_start_blocked_for_over_a_minute_is_skipped_as_missed() -> None:
    world = World(max_active_executions=1)
    world.engine.start("Plain", input={"n": 0}, execution_id="busy")
    world.create(interval="10m")
    for second in range(0, 70, 5):
        world.clock.advance_to(t("2026-11-15T19:00:00Z") + second * 1000)
    doc = world.get()
    assert (doc["fired"], doc["skipped"], doc["last_error"]) == (0, 1, None)
    assert doc["next_fire_at"] == "2026-11-15T19:10:00Z"
    world.engine.close()


def test_the_input_is_checked_again_at_each_start(world: World) -> None:
    world.create(interval="1m")
    strict = workflow(
        "Plain",
        [step("work", task="demo.work", with_=obj(n=inp("n")))],
        [task("demo.work", rec(n=Int), rec())],
        input=rec(n=Int, m=Int),
        version="2.0.0",
    )
    world.engine.deploy(strict)
    world.at("2026-11-15T18:52:00Z")
    assert world.executions() == []
    assert world.get()["last_error"] == (
        "INVALID_INPUT: workflow input is invalid at $.m: missing required field `m` of type Int"
    )


def test_pause_and_resume(world: World) -> None:
    world.create(interval="10s")
    paused = world.engine.schedules.pause("s")
    assert (paused["paused"], paused["next_fire_at"], paused["next_fire_times"]) == (True, None, [])
    world.at("2026-11-15T18:51:30Z")
    assert world.executions() == []
    world.at("2026-11-15T18:51:35Z")
    resumed = world.engine.schedules.resume("s")
    assert (resumed["paused"], resumed["next_fire_at"]) == (False, "2026-11-15T18:51:40Z")
    world.at("2026-11-15T18:51:40Z")
    assert world.executions() == ["s:2026-11-15T18:51:40Z"]
    assert world.get()["skipped"] == 0  # pausing is not downtime


def test_trigger_starts_now_even_while_paused_and_applies_overlap(world: World) -> None:
    world.create(interval="1h", paused=True)
    world.at("2026-11-15T18:52:22.296Z")
    answer = world.engine.schedules.trigger("s")
    assert answer == {
        "schedule_id": "s",
        "started": True,
        "execution_id": "s:manual:2026-11-15T18:52:22.296Z",
    }
    world.at("2026-11-15T18:52:23Z")
    assert world.engine.schedules.trigger("s") == {
        "schedule_id": "s",
        "started": False,
        "skipped": "overlap",
    }
    doc = world.get()
    assert (doc["fired"], doc["skipped"], doc["last_fire_at"]) == (1, 1, None)
    assert doc["last_execution_id"] == "s:manual:2026-11-15T18:52:22.296Z"
    assert doc["updated_at"] == "2026-11-15T18:52:23.000Z"
    assert doc["paused"] is True
    # The schedule counts the trigger the overlap policy declined, as the
    # metric does, and the count is stored (it covers every server).
    health = world.engine.health()
    assert (health["schedules_fired"], health["schedules_skipped_overlap"]) == (1, 1)
    stored = world.engine.store.get_schedule("s")
    assert stored is not None and (stored.fired, stored.skipped) == (1, 1)


def test_a_change_recomputes_from_now_and_keeps_counters(world: World) -> None:
    world.create(interval="10s")
    world.complete_all()
    world.at("2026-11-15T18:51:10Z")
    world.at("2026-11-15T18:51:12Z")
    changed = world.engine.schedules.update(
        "s", {"interval": None, "cron": "*/15 * * * *", "overlap": "cancel_previous"}
    )
    assert changed["cron"] == "*/15 * * * *" and "interval" not in changed
    assert changed["next_fire_at"] == "2026-11-15T19:00:00Z"
    assert (changed["fired"], changed["last_execution_id"]) == (1, "s:2026-11-15T18:51:10Z")
    assert changed["updated_at"] == "2026-11-15T18:51:12.000Z"


def test_delete_leaves_the_executions_alone(world: World) -> None:
    world.create(interval="10s")
    world.at("2026-11-15T18:51:10Z")
    assert world.engine.schedules.delete("s") == {"schedule_id": "s", "deleted": True}
    world.at("2026-11-15T18:51:30Z")
    assert world.executions() == ["s:2026-11-15T18:51:10Z"]
    assert world.status("s:2026-11-15T18:51:10Z") == "RUNNING"
    with pytest.raises(NotFoundError) as caught:
        world.engine.schedules.get("s")
    assert (caught.value.code, caught.value.message) == (
        "SCHEDULE_NOT_FOUND",
        "schedule `s` not found",
    )
    assert world.store.load_schedules() == []


def test_jitter_delays_the_fire_but_not_the_execution_id(world: World) -> None:
    created = world.create(schedule_id="hourly-check", interval="1h", jitter="30s")
    fire = t(created["next_fire_at"])
    assert t("2026-11-15T19:00:00Z") < fire < t("2026-11-15T19:00:30Z")
    assert created["next_fire_times"][0] == "2026-11-15T19:00:00Z"
    world.clock.advance_to(fire - 1)
    assert world.executions() == []
    world.clock.advance_to(fire)
    assert world.executions() == ["hourly-check:2026-11-15T19:00:00Z"]


def test_the_first_occurrence_is_after_creation_and_start_at_bounds_it(world: World) -> None:
    created = world.create(interval="1h", start_at="2026-11-20T08:20:00+01:00")
    assert created["next_fire_times"][:2] == ["2026-11-20T07:20:00Z", "2026-11-20T08:20:00Z"]
    assert created["start_at"] == "2026-11-20T07:20:00Z"
    ended = world.create(schedule_id="e", interval="1h", end_at="2026-11-15T18:00:00Z")
    assert (ended["next_fire_at"], ended["next_fire_times"], ended["paused"]) == (None, [], False)


@pytest.mark.parametrize(
    ("fields", "code", "message"),
    [
        ({"cron": "0 25 * * *"}, "INVALID_SCHEDULE", "cron `0 25 * * *`: `25` is out of range"),
        ({"cron": "0 2 * * *", "timezone": "Europe/Nowhere"}, "INVALID_SCHEDULE", "timezone"),
        ({"cron": "0 2 * * *", "interval": "1h"}, "INVALID_SCHEDULE", "both cron and interval"),
        ({}, "INVALID_SCHEDULE", "neither cron nor interval"),
        ({"interval": "-1h"}, "INVALID_SCHEDULE", "interval `-1h`: must not be negative"),
        (
            {
                "interval": "1h",
                "start_at": "2026-12-01T00:00:00Z",
                "end_at": "2026-11-01T00:00:00Z",
            },
            "INVALID_SCHEDULE",
            "end_at `2026-11-01T00:00:00Z` is not after start_at",
        ),
        (
            {"interval": "1h", "workflow": "Nope"},
            "WORKFLOW_NOT_FOUND",
            "workflow Nope is not registered",
        ),
        (
            {"interval": "1h", "version": "9.9.9"},
            "WORKFLOW_NOT_FOUND",
            "workflow Plain@9.9.9 is not registered",
        ),
        (
            {"interval": "1h", "input": {"n": "one"}},
            "INVALID_INPUT",
            "the schedule input is invalid for Plain@1.0.0 at $.n: expected Int, found a string",
        ),
    ],
)
def test_bad_schedules_are_refused_and_nothing_is_stored(
    world: World, fields: dict[str, Any], code: str, message: str
) -> None:
    with pytest.raises((InvalidError, NotFoundError)) as caught:
        world.create(**fields)
    assert caught.value.code == code
    assert caught.value.message.startswith(message), caught.value.message
    assert world.store.load_schedules() == []
    assert world.engine.schedules.list_schedules() == {"schedules": []}


def test_a_schedule_id_is_taken_once(world: World) -> None:
    world.create(interval="1h")
    with pytest.raises(ConflictError) as caught:
        world.create(interval="2h")
    assert (caught.value.code, caught.value.message) == (
        "SCHEDULE_EXISTS",
        "schedule `s` already exists",
    )
    assert world.get()["interval"] == "1h"


def test_a_bad_change_changes_nothing(world: World) -> None:
    world.create(interval="1h")
    with pytest.raises(InvalidError):
        world.engine.schedules.update("s", {"cron": "* * * * *"})
    with pytest.raises(InvalidError):
        world.engine.schedules.update("s", {"input": {"n": "x"}})
    doc = world.get()
    assert (doc["interval"], doc["input"]) == ("1h", {"n": 1})
    with pytest.raises(NotFoundError):
        world.engine.schedules.update("nope", {"paused": True})


def test_listing_is_by_id_and_filterable(world: World) -> None:
    world.create(schedule_id="b", interval="1h")
    world.create(schedule_id="a", cron="0 2 * * *", timezone="Europe/Berlin")
    listed: Any = world.engine.schedules.list_schedules()["schedules"]  # JSON
    assert [s["schedule_id"] for s in listed] == ["a", "b"]
    assert listed[0]["next_fire_at"] == "2026-11-16T01:00:00Z"
    assert world.engine.schedules.list_schedules(lambda wf: wf != "Plain") == {"schedules": []}


def test_many_schedules_fire_in_one_batch(world: World) -> None:
    for i in range(300):
        world.create(schedule_id=f"s{i:03d}", interval="1m")
    world.at("2026-11-15T18:52:00Z")
    assert len(world.executions()) == 300
    # One claim, one group commit and one advance for all of them.
    assert world.engine.health()["schedules_fired"] == 300


def test_a_closed_engine_fires_nothing(world: World) -> None:
    world.create(interval="10s")
    world.engine.close()
    world.clock.advance_to(t("2026-11-15T18:51:10Z"))
    row = world.store.get_schedule("s")
    assert row is not None and row.fired == 0
    world.engine = world.boot()


def test_format_of_times() -> None:
    assert format_time(t("2026-11-15T18:51:00.347Z"), millis=True) == "2026-11-15T18:51:00.347Z"
    assert format_time(t("2026-11-15T18:51:10Z")) == "2026-11-15T18:51:10Z"
    assert format_time(t("2026-11-15T19:00:12.359Z")) == "2026-11-15T19:00:12.359Z"
