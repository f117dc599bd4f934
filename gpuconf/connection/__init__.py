"""Connections: one per host per run, each call one round trip to the remote runner."""
