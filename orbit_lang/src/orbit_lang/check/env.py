"""What an expression may read, by position (chapter 26's table).

An `Env` answers one question for the expression checker: what does a path
root (`input`, `execution`, a step, a loop variable, `failure`, `event`)
mean here. Lambda parameters are added by the checker itself as it descends
into lambdas.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from orbit_lang.check.types import Type
from orbit_lang.source import Span

# Reports why a step that exists cannot be read here (E0308 in compensations).
Blocked = Callable[[str, Span], None]


@attrs.frozen
class Env:
    # The workflow input (or a mocked task's input in a test's `returns`);
    # None when nothing may be read at all (defaults, test constants).
    input: Type | None = None
    # For constant positions: the words naming the position in E0401
    # (`input` cannot be used in a default value).
    constant: str | None = None
    # Steps readable here, with the type they read as.
    steps: Mapping[str, Type] = attrs.field(factory=dict)
    # Every step name of the workflow (readable or not), for shadowing rules
    # and for telling an unreadable step from an unknown name.
    step_names: frozenset[str] = frozenset()
    blocked: Blocked | None = None
    loop_var: tuple[str, Type] | None = None
    # The loop variable of a `for` step inside its own `when` (E0401).
    hidden_loop_var: str | None = None
    failure: bool = False
    event: Type | None = None

    @property
    def execution(self) -> bool:
        return self.constant is None or self.input is not None


CONSTANT_DEFAULT = Env(constant="a default value")
