"""Benchmarks. Speed is measured here and written up in docs/benchmarks.md, never asserted in tests."""
