"""Benchmarks: each prints figures and a ratio against a baseline run in the same process."""
