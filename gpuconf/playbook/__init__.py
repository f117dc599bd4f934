"""Playbooks and roles: YAML in, validated models out (pydantic), with the file, line and column
of every error; roles and their argument specs; Ansible's module names turned into gpuconf's task
types; the host patterns of a play."""
