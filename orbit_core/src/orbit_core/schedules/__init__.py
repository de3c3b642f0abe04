"""Schedules (chapter 41): the pure part.

`spec` parses and validates a schedule's settings, `cron` and `timing`
compute its occurrences (cron through cronsim, zones through zoneinfo with
the tzdata package), `jitter` delays each fire deterministically, `policy`
holds the overlap and catch-up decisions and `document` renders the API's
schedule document. Nothing here reads a clock or performs I/O: callers pass
`now`, so the same code runs in simulated time. The firing component that
uses it is `orbit_core.engine.scheduler`.
"""
