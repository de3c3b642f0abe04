"""orbit_store."""

__version__ = "0.5.0"

__all__ = ["__version__"]
