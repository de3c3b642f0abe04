"""ORBIT worker SDK: run task handlers in Python, and start workflows.

from orbit_sdk import Worker

worker = Worker("hello-python")

@worker.task("greeting.compose", version="1.0.0")
def compose(input, ctx):
    return {"message": f"Hello, {input['name']}"}

worker.run()
"""

from __future__ import annotations

from orbit_sdk._version import VERSION as __version__
from orbit_sdk.client import ApiError, Client
from orbit_sdk.context import Context
from orbit_sdk.errors import TaskError
from orbit_sdk.worker import Worker

__all__ = ["ApiError", "Client", "Context", "TaskError", "Worker", "__version__"]
