"""What a store is asked for: one page of executions under a typed filter."""

from __future__ import annotations

import attrs

from orbit_core.visibility.check import Filter


@attrs.frozen
class SearchQuery:
    """Up to `limit` executions passing `filter` (None: all), in `status`
    and of `workflow` when given, after the cursor position `after` (the
    (created_at_ms, execution_id) of the previous page's last row), newest
    first."""

    filter: Filter | None
    status: str | None = None
    workflow: str | None = None
    limit: int = 50
    after: tuple[int, str] | None = None
