"""Executable specification (pure: no os, no clock, no randomness)."""
