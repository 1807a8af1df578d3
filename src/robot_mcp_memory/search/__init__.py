"""Search: query sanitising and ranking. Pure (no SQL execution, no I/O)."""
