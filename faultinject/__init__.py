"""Fault injection: a simulated disk and crashable owner behind the core seams."""
