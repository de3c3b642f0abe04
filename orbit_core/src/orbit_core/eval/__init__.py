"""The expression evaluator's parts; the public entry point is `orbit_core.evaluate`."""
