"""Benchmarks run on their own: ``python -m pytest benchmarks --benchmark-only``.

Each file pairs a toolswap operation with a baseline measured in the same run,
so results are read as ratios, never as absolute times.
"""
