"""A node_exporter textfile: the run's results as Prometheus gauges.

node_exporter's textfile collector reads every `*.prom` file in its directory
on each scrape, so the file is written atomically (a temp file in the same
directory, then a rename): a scrape never sees half a file. Samples carry no
timestamps (the collector refuses them); `gpuconf_last_run_timestamp_seconds`
says how old the numbers are, so an alert can catch a timer that stopped.

Every metric is a gauge, one sample per label set. The names, labels and
values are documented in `docs/metrics.md`. prometheus_client writes the
exposition format (escaping label values, HELP and TYPE lines) so this module
never formats it by hand.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuconf.files.bounded import write_atomic
from gpuconf.report.jsonreport import host_in_sync
from gpuconf.report.redact import visible_findings
from gpuconf.results import HostResult, RunResult, Status

if TYPE_CHECKING:  # imported where used: a run without --prometheus does not pay for it (~10 ms)
    from prometheus_client import CollectorRegistry, Gauge

TASK_LABELS = ["host", "play", "task", "role"]
SEVERITY_VALUE = {"ok": 0, "warning": 1, "failure": 2}


def _gauge(registry: CollectorRegistry, name: str, doc: str, labels: list[str] | None = None) -> Gauge:
    from prometheus_client import Gauge

    return Gauge(name, doc, labels or [], registry=registry)


class Samples:
    """Label sets to values for one labelled gauge. Two tasks can share a label
    set (same name in one play); the exposition format allows one sample per
    set, so the larger value wins: a drifted duplicate is not hidden."""

    def __init__(self) -> None:
        self.values: dict[tuple[tuple[str, str], ...], float] = {}

    def add(self, value: float, **labels: str) -> None:
        key = tuple(labels.items())
        self.values[key] = max(self.values.get(key, value), value)

    def fill(self, gauge: Gauge) -> None:
        for key, value in self.values.items():
            gauge.labels(**dict(key)).set(value)


def registry_for(run: RunResult) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=True)
    per_task = {name: Samples() for name in ("drift", "failed", "unknown")}
    health = Samples()
    for host in run.hosts.values():
        _task_samples(host, per_task, health)
    per_host = {name: Samples() for name in ("check_ok", "unreachable", "reboot_pending")}
    for name, host in run.hosts.items():
        per_host["check_ok"].add(int(host_in_sync(run, host)), host=name)
        per_host["unreachable"].add(int(host.unreachable), host=name)
        per_host["reboot_pending"].add(int(host.reboot_pending), host=name)

    per_task["drift"].fill(_gauge(registry, "gpuconf_drift",
                                  "1 when check found that this task would change something (drift), else 0",
                                  TASK_LABELS))
    per_task["failed"].fill(_gauge(registry, "gpuconf_task_failed", "1 when this task failed, else 0",
                                   TASK_LABELS))
    per_task["unknown"].fill(_gauge(registry, "gpuconf_task_unknown",
                                    "1 when this task's state could not be known (a probe hung, the deadline "
                                    "came first), else 0", TASK_LABELS))
    per_host["check_ok"].fill(_gauge(registry, "gpuconf_check_ok",
                                     "1 when the host is in sync (check) or converged (apply), with nothing "
                                     "failed, unknown or unreachable", ["host"]))
    per_host["unreachable"].fill(_gauge(registry, "gpuconf_unreachable", "1 when the host could not be reached",
                                        ["host"]))
    per_host["reboot_pending"].fill(_gauge(registry, "gpuconf_reboot_pending",
                                           "1 when apply needs a reboot it was not allowed to do", ["host"]))
    health.fill(_gauge(registry, "gpuconf_health", "A health finding: 0 ok, 1 warning, 2 failure (the same as "
                       "its severity label)", ["host", "probe", "gpu", "severity"]))
    ended = run.ended or run.started
    _gauge(registry, "gpuconf_last_run_timestamp_seconds",
           "When the run ended, in seconds since the epoch").set(round(ended, 3))
    _gauge(registry, "gpuconf_run_duration_seconds", "How long the run took, in seconds").set(
        round(ended - run.started, 3))
    _gauge(registry, "gpuconf_exit_code", "The run's exit code, a bitmask: 2 drift, 4 failed or unknown, "
           "8 unreachable, 16 reboot pending").set(run.exit_code)
    _gauge(registry, "gpuconf_deadline_reached", "1 when --deadline stopped the run before every task ran").set(
        int(run.deadline_reached))
    return registry


def _task_samples(host: HostResult, per_task: dict[str, Samples], health: Samples) -> None:
    for task in host.tasks:
        if task.status == Status.UNREACHABLE and task.task == "connect":
            continue  # not a task: gpuconf_unreachable says it
        labels = {"host": host.host, "play": task.play, "task": task.task, "role": task.role or ""}
        per_task["drift"].add(int(task.status == Status.WOULD_CHANGE), **labels)
        per_task["failed"].add(int(task.status == Status.FAILED), **labels)
        per_task["unknown"].add(int(task.status == Status.UNKNOWN), **labels)
        for finding in visible_findings(task):
            gpu = "" if finding.gpu is None else str(finding.gpu)
            health.add(SEVERITY_VALUE.get(finding.severity, 2), host=host.host, probe=finding.probe, gpu=gpu,
                       severity=finding.severity)


def render(run: RunResult) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry_for(run)).decode()


def write(run: RunResult, path: str | Path) -> None:
    write_atomic(path, render(run))
