"""Secrets never reach output: console, --diff, JSON, JUnit, Prometheus, errors.

A value is secret when it is tagged `!secret` in YAML, when it comes from an Ansible
Vault (a `!vault` value, or any string of an encrypted file: gpuconf/vault.py), or when
its variable's name is listed in the `secret_vars` variable (a list, set at any level).
Results are redacted where they are made, so no reporter can leak one.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gpuconf.results import ChangeReport, TaskResult
from gpuconf.yamlsrc import Secret

MASK = "********"
MIN_LENGTH = 3  # shorter values would mask innocent text everywhere


def secret_values(layers: list[Mapping[str, Any]]) -> set[str]:
    names: set[str] = set()
    for layer in layers:
        listed = layer.get("secret_vars") if isinstance(layer, Mapping) else None
        if isinstance(listed, (list, tuple)):
            names.update(str(n) for n in listed)
    values: set[str] = set()
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, Secret) or (key in names and isinstance(value, (str, int, float))):
                if len(str(value)) >= MIN_LENGTH:
                    values.add(str(value))
            elif isinstance(value, (dict, list)):
                values.update(s for s in _nested_secrets(value) if len(s) >= MIN_LENGTH)
    return values


def _nested_secrets(value: Any) -> list[str]:
    """`!secret` and vault strings inside lists and mappings (a vault file's every string)."""
    if isinstance(value, Secret):
        return [str(value)]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for item in value for s in _nested_secrets(item)]
    return []


def redact_text(text: Any, secrets: set[str]) -> Any:
    if not isinstance(text, str) or not secrets:
        return text
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _redact_any(value: Any, secrets: set[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {k: _redact_any(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_any(v, secrets) for v in value]
    return value


def redact_result(result: TaskResult, secrets: set[str]) -> TaskResult:
    if not secrets:
        return result
    result.message = redact_text(result.message, secrets)
    result.error = redact_text(result.error, secrets)
    result.stdout = redact_text(result.stdout, secrets)
    result.stderr = redact_text(result.stderr, secrets)
    result.traceback = redact_text(result.traceback, secrets)  # an exception's message can hold a value
    result.data = _redact_any(result.data, secrets)
    result.changes = [ChangeReport(redact_text(c.summary, secrets), redact_text(c.diff, secrets),
                                   _redact_any(c.before, secrets), _redact_any(c.after, secrets),
                                   [redact_text(op, secrets) for op in c.ops]) for c in result.changes]
    result.findings = [dataclasses.replace(f, message=redact_text(f.message, secrets)) for f in result.findings]
    return result
