"""The compiler tests' process raises the recursion limit once, as `orbit`
does at start-up (orbit_lang.process): sources nest up to 100 levels."""

from orbit_lang.process import allow_deep_sources

allow_deep_sources()
