"""The SDK's version, announced to the runtime at registration."""

from __future__ import annotations

VERSION = "0.1.0"
USER_AGENT = f"orbit-python/{VERSION}"
