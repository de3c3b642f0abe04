"""Falcon resources: each responder parses, calls one engine method, serialises."""
