"""Fixtures shared across the suite. The lab's live in tests/lab_fixtures.py."""
pytest_plugins = ["tests.lab_fixtures"]
