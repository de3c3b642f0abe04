"""ORBIT's pure core: nothing here performs I/O or reads a clock."""

__version__ = "0.5.0"

__all__ = ["__version__"]
