"""The exception a handler raises to fail an attempt on purpose."""

from __future__ import annotations

from typing import Any


class TaskError(Exception):
    """Fails the current attempt with a stable error code.

    retryable=False fails the step at once, whatever its retry policy; details
    is any JSON value and is stored with the error in the execution history.
    """

    def __init__(
        self, code: str, message: str = "", retryable: bool = True, details: Any = None
    ) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details
