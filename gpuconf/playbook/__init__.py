"""Playbooks and roles: YAML in, validated models out."""
