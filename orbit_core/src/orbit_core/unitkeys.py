"""Unit keys: how the units of an execution are named, built and read only here.

A unit key names one unit of work in an execution's history, so the format is
part of the stored data and of the API documents; it must never change.

    step                     a main step
    step[i]                  element i of a fan-out step
    compensate:<unit>        the compensation of a succeeded main or element unit
    on_<kind>:step           a step of the failure/cancel/timeout handler block
    on_event:signal@seq      one event-handler instance (the delivered signal)
    on_event:signal@seq:step a step of that instance

Steps of a block are named by the block's *prefix* followed by the step name
(`scoped`): the main block's prefix is empty, a handler block's is
`on_<kind>:`, an event instance's is the instance key and `:`.

Run-scoped names derived from a unit key live here too: the default
idempotency key of an attempt and the execution id of a child workflow both
carry the run from the second run on, so a continued-as-new execution never
reuses the first run's names.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import cast

COMPENSATE = "compensate:"
EVENT = "on_event:"
HANDLER_KINDS = ("failure", "cancel", "timeout")
_HANDLER_PREFIXES = tuple(f"on_{kind}:" for kind in HANDLER_KINDS)


# ---------------------------------------------------------------- main steps and elements


def element(step: str, index: int) -> str:
    return f"{step}[{index}]"


def split_element(key: str) -> tuple[str, int | None]:
    """`step[i]` -> (step, i); any other key -> (key, None)."""
    if key.endswith("]"):
        name, _, index = key[:-1].partition("[")
        return name, int(index)
    return key, None


def is_element(key: str) -> bool:
    return key.endswith("]")


def is_main(key: str) -> bool:
    """A unit of a main step (not an element, compensation or handler unit)."""
    return ":" not in key and "[" not in key


def is_main_block(key: str) -> bool:
    """A main step or one of its elements (no compensation or handler unit)."""
    return ":" not in key


def step_name(key: str) -> str:
    """The step of a main or element key: `step[i]` -> `step`."""
    return key.partition("[")[0]


def renamed(key: str, names: dict[str, str]) -> str:
    """`key` after a live migration renamed main steps (`names`: old to
    new): a main step, one of its elements and its compensation follow
    their step; handler units keep their key."""
    target = compensated(key)
    if target is not None:
        return compensation(renamed(target, names))
    if ":" in key:
        return key
    step = step_name(key)
    new = names.get(step)
    return key if new is None else new + key[len(step) :]


# ---------------------------------------------------------------- compensation


def compensation(target: str) -> str:
    return COMPENSATE + target


def compensated(key: str) -> str | None:
    """The unit a compensation key undoes, or None for any other key."""
    return key[len(COMPENSATE) :] if key.startswith(COMPENSATE) else None


def is_compensation(key: str) -> bool:
    return key.startswith(COMPENSATE)


# ---------------------------------------------------------------- handler blocks


def handler_prefix(kind: str) -> str:
    return f"on_{kind}:"


def is_handler(key: str) -> bool:
    """A step of the failure, cancel or timeout handler block."""
    return key.startswith(_HANDLER_PREFIXES)


def split_handler(key: str) -> tuple[str, str] | None:
    """`on_<kind>:step` -> (kind, step), or None for any other key."""
    if not is_handler(key):
        return None
    prefix, _, name = key.partition(":")
    return prefix[len("on_") :], name


def is_recovery(key: str) -> bool:
    """Compensation and handler units: their failure does not fail the execution."""
    return is_compensation(key) or is_handler(key)


# ---------------------------------------------------------------- event handlers


def event_instance(signal: str, seq: int) -> str:
    return f"{EVENT}{signal}@{seq}"


def instance_prefix(instance: str) -> str:
    return instance + ":"


def is_event(key: str) -> bool:
    """An event-handler instance or one of its steps."""
    return key.startswith(EVENT)


def event_signal(key: str) -> str:
    """The signal of an event instance key or of one of its steps."""
    return key[len(EVENT) :].partition("@")[0]


def split_event_step(key: str) -> tuple[str, str] | None:
    """`on_event:signal@seq:step` -> (signal, step), or None for other keys."""
    if not is_event(key):
        return None
    head, _, name = key[len(EVENT) :].partition(":")
    return head.partition("@")[0], name


# ---------------------------------------------------------------- blocks


# The key of `step` in the block whose prefix is `prefix`: `prefix + step`.
# The C function itself, since the decider builds a key per dependency it reads.
scoped = cast(Callable[[str, str], str], operator.concat)


# ---------------------------------------------------------------- run-scoped names


def default_idempotency_key(execution_id: str, run: int, key: str) -> str:
    return f"{execution_id}/{key}" if run <= 1 else f"{execution_id}/run{run}/{key}"


def child_execution_id(parent_id: str, run: int, key: str) -> str:
    """`<parent>.<unit>` with brackets as dots; `<parent>.run<N>.<unit>` from run 2."""
    unit = key.replace("[", ".").replace("]", "")
    return f"{parent_id}.{unit}" if run <= 1 else f"{parent_id}.run{run}.{unit}"
