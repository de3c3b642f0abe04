"""The `Engine` application service: the durable runtime as a library.

Every operation is a command. Commands that arrive together form a group:
one thread applies them to the in-memory states, runs the decider to a
fixpoint, matches waiting pollers with the tasks that became available, and
the group is committed in ONE store transaction before any of its callers is
answered. The HTTP server is a thin adapter over the public methods, which
return JSON-shaped values (dicts ready to serialise) and raise `OrbitError`s.

Modules, one job each:

- `service`: the `Engine` façade, the embedding API; each method is one
  command. `worker_desk`: the worker protocol's calls (`engine.workers`),
  another audience's API. `handoff`: the steps a server sharing executions
  needs (`Sharing`, `handoff.of(engine)`), shown to neither. `counters`:
  what `health` counts, one typed object. `facade`: the façade's shape
  (`EngineApi`) and `Wrapped`, the base of engines that wrap an `Engine`.
  `shared` and `task_desk`: shared mode's engine, over the coordination
  ports of `orbit_core.coordination`.
- `pipeline`: group commit (leader, committer thread, merged transactions,
  answering and parking callers); `commands`: a command and its group's
  transaction.
- `executions`: the running executions in memory and the decider loop
  (append, decide, route, run ends); `live`: what is kept per execution;
  `children`: child workflows; `control`: start, cancel, signal.
- `workers`: worker sessions and the attempts they hold; `polling`: polls,
  long polls and dispatch; `results`: complete and fail, reconciled.
- `reads`: histories, queries and waits; `catalog`: deployed definitions;
  `handlers`: in-process handlers; `recovery`: rebuilding memory on start;
  `backoff`: retry delays of background threads; `tuning`: `tune_process`.

Failures the engine handles without a caller to tell (a refused commit, an
exception in a background thread, a group that had to be undone) are
reported through the `Faults` port of `orbit_core.ports`.
"""

from orbit_core.engine.control import DEFAULT_CANCEL_REASON
from orbit_core.engine.executions import ADAPTER_DISABLED
from orbit_core.engine.handlers import TaskContext, TaskError
from orbit_core.engine.live import RUNTIME_WORKER
from orbit_core.engine.polling import DEFAULT_POLL_MS, MAX_POLL_MS
from orbit_core.engine.reads import DEFAULT_WAIT_MS, MAX_WAIT_MS
from orbit_core.engine.recovery import BUILTIN_RESTART_REASON
from orbit_core.engine.service import TICK_MS, Engine
from orbit_core.engine.tuning import tune_process
from orbit_core.engine.worker_desk import PollAfter, Reported, WorkerApi, WorkerDesk
from orbit_core.engine.workers import RESTART_REASON

__all__ = [
    "ADAPTER_DISABLED",
    "BUILTIN_RESTART_REASON",
    "DEFAULT_CANCEL_REASON",
    "DEFAULT_POLL_MS",
    "DEFAULT_WAIT_MS",
    "MAX_POLL_MS",
    "MAX_WAIT_MS",
    "RESTART_REASON",
    "RUNTIME_WORKER",
    "TICK_MS",
    "Engine",
    "PollAfter",
    "Reported",
    "TaskContext",
    "TaskError",
    "WorkerApi",
    "WorkerDesk",
    "tune_process",
]
