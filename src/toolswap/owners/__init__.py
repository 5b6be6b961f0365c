"""Reference owner adapters."""
