"""The package version (one place; the public front and provenance blocks read it)."""
__version__ = "0.1.0"
