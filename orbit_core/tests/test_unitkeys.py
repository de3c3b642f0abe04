"""The unit-key format: every kind of key reads back as it was built."""

from __future__ import annotations

from orbit_core import unitkeys as uk


def test_elements_round_trip() -> None:
    key = uk.element("charge", 3)
    assert key == "charge[3]"
    assert uk.split_element(key) == ("charge", 3)
    assert uk.split_element("charge") == ("charge", None)
    assert uk.is_element(key) and not uk.is_main(key) and uk.is_main_block(key)
    assert uk.step_name(key) == "charge"


def test_compensation_round_trip() -> None:
    key = uk.compensation("charge[1]")
    assert key == "compensate:charge[1]"
    assert uk.compensated(key) == "charge[1]"
    assert uk.compensated("charge") is None
    assert uk.is_recovery(key) and not uk.is_main_block(key)


def test_handlers_round_trip() -> None:
    for kind in uk.HANDLER_KINDS:
        key = uk.scoped(uk.handler_prefix(kind), "notify")
        assert key == f"on_{kind}:notify"
        assert uk.split_handler(key) == (kind, "notify")
        assert uk.is_handler(key) and uk.is_recovery(key)
    assert uk.split_handler("on_event:x@1:notify") is None
    assert uk.split_handler("notify") is None


def test_event_instances_round_trip() -> None:
    instance = uk.event_instance("paid", 7)
    assert instance == "on_event:paid@7"
    key = uk.scoped(uk.instance_prefix(instance), "ship")
    assert key == "on_event:paid@7:ship"
    assert uk.event_signal(instance) == uk.event_signal(key) == "paid"
    assert uk.split_event_step(key) == ("paid", "ship")
    assert uk.is_event(key) and not uk.is_handler(key) and not uk.is_recovery(key)


def test_run_scoped_names() -> None:
    assert uk.default_idempotency_key("e1", 1, "a[2]") == "e1/a[2]"
    assert uk.default_idempotency_key("e1", 3, "a[2]") == "e1/run3/a[2]"
    assert uk.child_execution_id("p", 1, "kids[2]") == "p.kids.2"
    assert uk.child_execution_id("p", 2, "kid") == "p.run2.kid"


def test_only_main_and_event_units_stop_with_the_execution() -> None:
    # A compensation (or outcome-handler) attempt runs *because* the execution
    # aborts; telling it to stop would leave the undo half done. Elements of
    # a fanned-out compensation once matched the `step[i]` rule by their `]`.
    from orbit_core.engine.live import aborts_with_execution

    for key in ("charge", "charge[3]", "on_event:approve@7", "on_event:approve@7:notify"):
        assert aborts_with_execution(key), key
    for key in ("compensate:charge", "compensate:charge[1]", "on_failure:alert"):
        assert not aborts_with_execution(key), key
