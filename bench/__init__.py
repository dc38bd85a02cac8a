"""Benchmarks that print tables (not part of the test suite; a smoke of each runs there)."""
