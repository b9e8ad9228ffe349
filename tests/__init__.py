"""Test suite. A package, so that tests/interop does not shadow the top-level ``interop`` package."""
