"""Helpers the tests, the benchmarks and the load harness share, each written once.

Not part of the library (not installed, not measured by coverage): it is on pytest's
`pythonpath`, mypy's `files`, and the import path of `make bench` and `make load`.
"""
