"""Fixtures shared across the suite. The lab's live in tests/lab_fixtures.py; the
reliability figures printed at the end in tests/figures.py."""
pytest_plugins = ["tests.lab_fixtures", "tests.figures"]
