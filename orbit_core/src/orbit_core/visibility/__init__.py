"""Typed, transactional visibility (docs/language/visibility.md).

A workflow's `search` block names fields the runtime writes to the store's
search index in the very commit of the event that makes each value known:
`fields` computes those values from an execution's state, `filter` parses
the small filter language of `orbit ps --where` and `GET /v1/executions`,
`check` types a filter against the declared fields and gives the store a
`Filter` it compiles to SQL (or, in memory, `matches` evaluates).
"""
