"""The version of toolswap: the one source ``pyproject.toml`` reads it from."""

__version__ = "0.1.0"
