"""ORBIT worker SDK: run task handlers in Python, and start workflows.

Worker serves task contracts to a runtime, Client calls the runtime's HTTP API,
TaskError fails an attempt on purpose, and Context describes the attempt a
handler runs. The package README has a complete worker.
"""

from __future__ import annotations

from orbit_sdk._version import VERSION as __version__
from orbit_sdk.client import ApiError, Client
from orbit_sdk.context import Context
from orbit_sdk.errors import TaskError
from orbit_sdk.worker import Worker

__all__ = ["ApiError", "Client", "Context", "TaskError", "Worker", "__version__"]
