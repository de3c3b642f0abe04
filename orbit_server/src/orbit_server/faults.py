"""The server's adapter of the engine's `Faults` port: every failure the
engine handles by itself is logged at `error` with its traceback, and counted
(`FaultLog` keeps the counts and what fails now) for `/v1/metrics`'
`orbit_engine_faults_total` and `/v1/health`'s degraded state."""

from __future__ import annotations

from orbit_core.ports import FaultLog
from orbit_server import logs

# The log message for each component; the book names the first two.
MESSAGES = {
    "tick": "tick failed",
    "builtin": "recording built-in task result failed",
    "store": "storage failed",
    "prepare": "applying a group of requests failed",
    "command": "applying a request failed",
    "commit": "publishing a commit failed",
    "handler": "in-process handler thread failed",
}


class LoggedFaults(FaultLog):
    """`quiet` names components that are counted but not logged here, because
    something else logs them already (a store wrapper that logs its errors)."""

    def __init__(self, quiet: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self._quiet = quiet

    def report(self, component: str, error: BaseException) -> None:
        super().report(component, error)
        if component in self._quiet:
            return
        logs.logger().error(
            MESSAGES.get(component, f"{component} failed"),
            component=component,
            error=f"{type(error).__name__}: {error}",
            exc_info=error,
        )

    def recovered(self, component: str) -> None:
        failing = component in self.failing()
        super().recovered(component)
        if failing and component == "store":
            logs.logger().warning("storage works again")
