"""Integration tests, by the real component they start (tests/conftest.py has the fixtures)."""
