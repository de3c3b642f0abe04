"""`orbit verify` (beyond the book): every interleaving of task outcomes,
signals, timers and cancellations of a workflow, within bounds, checked
against the invariants of its `verify` blocks and the built-in ones.

- `model`: one execution as a transition system, the environment's choices
  applied as the runtime records them and the real decider
  (`orbit_core.decide`, `orbit_core.state`) doing the rest;
- `explore`: the breadth-first search with state hashing, the invariants and
  the coverage;
- `counterexample`: a violation as a history file `orbit replay` accepts and
  as an `orbit test` case;
- `targets`: what to verify, from a compilation.

Why here and not in orbit_core: the search itself does no I/O, but it
judges executions with chapter 51's expectations (`orbit_cli.testrun`) and
generates values with `orbit simulate`'s sampler (`orbit_cli.simulate`),
both CLI code, and it is a tool around the kernel rather than part of the
runtime: orbit_core keeps only what the engine needs.
"""
