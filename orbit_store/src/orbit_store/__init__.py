"""orbit_store: the store port on SQLAlchemy Core (SQLite; PostgreSQL later)."""

__version__ = "0.5.0"

__all__ = ["__version__"]
