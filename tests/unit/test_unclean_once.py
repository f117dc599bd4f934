"""Issue 37: whether a host is unclean is decided once (gpuconf/results.py: TaskResult.failed,
HostResult.failed, failed_under, unclean; RunResult.failed_hosts, as Nornir's Result.failed and
AggregatedResult.failed_hosts) and every consumer agrees: the exit code, the retry file, the JSON
report's in_sync, the HTML state, check --slurm's drain and remediate's verdict."""
from __future__ import annotations

import pytest

from gpuconf.cli.retry import hosts_to_retry
from gpuconf.remediate.command import verdict
from gpuconf.report.aggregate import host_state
from gpuconf.report.jsonreport import host_in_sync
from gpuconf.results import EXIT_FAILED, Finding, HostResult, RunResult, Status, TaskResult
from gpuconf.scheduler.healthcheck import failure_reason


def task(status: Status, ignored: bool = False, warning: bool = False) -> TaskResult:
    findings = [Finding("ecc", "warning", "GPU 0: 3 corrected ECC errors", gpu=0)] if warning else []
    return TaskResult("n1", "p", f"t-{status.value}", status, ignored=ignored, error="it went wrong",
                      findings=findings)


CASES = {  # tasks -> (failed, failed under --strict, unclean under --strict)
    "in sync": ([task(Status.OK)], False, False, False),
    "a failure": ([task(Status.OK), task(Status.FAILED)], True, True, True),
    "unknown": ([task(Status.UNKNOWN)], True, True, True),
    "an ignored failure": ([task(Status.FAILED, ignored=True)], False, False, False),
    "drift": ([task(Status.WOULD_CHANGE)], False, False, True),
    "a health warning": ([task(Status.OK, warning=True)], False, True, True),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("strict", [False, True])
def test_every_consumer_reads_the_one_definition(name, strict):
    tasks, failed, failed_strict, unclean_strict = CASES[name]
    host = HostResult("n1", tasks)
    run = RunResult("check", "p.yml", "i", 0.0, strict=strict, hosts={"n1": host})
    counts = failed_strict if strict else failed
    assert host.failed is failed
    assert host.failed_under(strict) is counts
    assert bool(run.exit_code & EXIT_FAILED) is counts
    assert (hosts_to_retry(run) == ["n1"]) is counts
    assert list(run.failed_hosts()) == (["n1"] if counts else [])
    drifted = name == "drift"
    assert host_in_sync(run, host) is not (counts or drifted)
    assert (host_state(host) == "red") is failed
    unclean = bool(host.unclean(strict))
    assert unclean is (unclean_strict if strict else (failed or drifted))
    assert verdict(host, "n1", strict).clean is not unclean
    # check --slurm from a controller drains by the same tasks (warnings never drain a node there)
    assert (failure_reason(host, complete=True, drift_drains=True) is not None) is (failed or drifted)
