"""Reporters: text (with `aggregate`: results folded across hosts), JSON, JUnit, Prometheus and
HTML, and the live lines of a run. Each consumes results only, never the runner, and never
prints a secret (`redact`)."""
