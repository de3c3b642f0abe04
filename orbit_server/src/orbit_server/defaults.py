"""The defaults of `orbit server`, written once.

The command's flags show them in `--help` (orbit_cli/commands/server.py)
and `ServerConfig` starts from them (orbit_server/config.py), so the two
cannot drift apart. This module imports nothing: the CLI reads it when it
builds its commands, before it knows whether a server is wanted."""

from __future__ import annotations

DB = "orbit.db"
ADDR = "127.0.0.1:7233"
SESSION_TIMEOUT_S = 30.0
MAX_BODY = 4 * 1024 * 1024
LOG_FORMAT = "text"
THREADS = 128
CLUSTER_MODE = "standby"
NODE_TIMEOUT_S = 5.0
ARCHIVE = "orbit-archive"
IDEMPOTENCY_RETENTION_H = 24
