"""Reporters: each consumes results only, never the runner."""
