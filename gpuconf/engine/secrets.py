"""Secrets never reach output: console, -vvv, --diff, JSON, JUnit, Prometheus, errors.

A value is secret when it is tagged `!secret` in YAML, when it comes from an Ansible
Vault (a `!vault` value, or any string of an encrypted file: gpuconf/files/vault.py), or when
its variable's name is listed in the `secret_vars` variable (a list, set at any level).
So is what a template makes from one (`| upper`, a slice, `'x' ~ token`): templating marks
it and tells the host's `SecretSet` (gpuconf/templating/secret_marks.py). Results are redacted where
they are made, so no reporter can leak one; -vvv redacts each request before it shows it.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from gpuconf.files.yamlsrc import Secret
from gpuconf.results import ChangeReport, TaskResult

MASK = "********"
MIN_LENGTH = 3  # shorter values would mask innocent text everywhere


class SecretSet:
    """The strings one host's output must not show: its secrets, and each string that its
    templates made from one, added while the run goes (a task renders before it runs)."""

    def __init__(self, values: Iterable[str] = ()):
        self._values: set[str] = set()
        self._longest_first: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self.update(values)

    def add(self, value: str) -> None:
        if len(value) >= MIN_LENGTH and value not in self._values:
            with self._lock:
                self._values.add(value)
                # longest first: a secret inside a longer string made from it goes with it
                self._longest_first = tuple(sorted(self._values, key=len, reverse=True))

    def update(self, values: Iterable[str]) -> None:
        for value in values:
            self.add(value)

    def longest_first(self) -> tuple[str, ...]:
        return self._longest_first

    def redact(self, text: str) -> str:
        return redact_text(text, self)  # type: ignore[no-any-return]

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __len__(self) -> int:
        return len(self._values)


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


def mark_known(value: Any, secrets: SecretSet) -> Any:
    """A registered result with each string that holds one of `secrets` marked (a command's
    output that echoes a token), so that a template that changes it is marked in turn."""
    if not secrets:
        return value
    if isinstance(value, str):
        return Secret(value) if any(secret in value for secret in secrets.longest_first()) else value
    if isinstance(value, list):
        return [mark_known(item, secrets) for item in value]
    if isinstance(value, dict):  # in place: a registered result's own type (PendingResult) stays
        for key, item in value.items():
            value[key] = mark_known(item, secrets)
    return value


def redact_text(text: Any, secrets: SecretSet | set[str]) -> Any:
    if not isinstance(text, str) or not secrets:
        return text
    ordered = secrets.longest_first() if isinstance(secrets, SecretSet) else sorted(secrets, key=len, reverse=True)
    for secret in ordered:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_value(value: Any, secrets: SecretSet | set[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {k: redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v, secrets) for v in value]
    return value


def redact_result(result: TaskResult, secrets: SecretSet | set[str]) -> TaskResult:
    if not secrets:
        return result
    result.task = redact_text(result.task, secrets)  # a loop's label: `name (item=...)`
    result.message = redact_text(result.message, secrets)
    result.error = redact_text(result.error, secrets)
    result.stdout = redact_text(result.stdout, secrets)
    result.stderr = redact_text(result.stderr, secrets)
    result.traceback = redact_text(result.traceback, secrets)  # an exception's message can hold a value
    result.data = redact_value(result.data, secrets)
    result.changes = [ChangeReport(redact_text(c.summary, secrets), redact_text(c.diff, secrets),
                                   redact_value(c.before, secrets), redact_value(c.after, secrets),
                                   [redact_text(op, secrets) for op in c.ops]) for c in result.changes]
    result.findings = [dataclasses.replace(f, message=redact_text(f.message, secrets)) for f in result.findings]
    return result
