"""A synthetic fleet's RunResult: as many hosts as a test wants, with the roles of the a100 playbook."""
from __future__ import annotations

from gpuconf.results import ChangeReport, Finding, HostResult, RunResult, Status, TaskResult

ROLES = ["kernel", "nvidia_driver", "cuda", "fabricmanager", "infiniband", "health"]
TASKS_PER_ROLE = 5  # 30 tasks a host, about what playbooks/a100-node.yml runs


def host_name(index: int) -> str:
    return f"a100-{index:03d}"


def synthetic_run(hosts: int, drifted: tuple[int, ...] = (), failed: tuple[int, ...] = (),
                  unreachable: tuple[int, ...] = ()) -> RunResult:
    """`hosts` hosts in sync, but: `drifted` ones need cuda-toolkit-12-8 (with a diff on a file),
    `failed` ones have a fabricmanager that will not start and an Xid finding, `unreachable`
    ones refused the connection. Indexes count from 1, as the host names do."""
    run = RunResult(verb="check", playbook="playbooks/a100-node.yml", inventory="fleet.yml", started=1.0e9,
                    ended=1.0e9 + 42.0, plays=["a100 nodes"])
    for index in range(1, hosts + 1):
        name = host_name(index)
        host = run.host(name)
        if index in unreachable:
            host.unreachable, host.error = True, "connect: [Errno 111] Connection refused"
            host.tasks.append(TaskResult(name, "a100 nodes", "connect", Status.UNREACHABLE, error=host.error))
            continue
        host.tasks.extend(_tasks(name, index in drifted, index in failed))
    return run


def _tasks(host: str, drifted: bool, failed: bool) -> list[TaskResult]:
    tasks = []
    for role in ROLES:
        for number in range(TASKS_PER_ROLE):
            task = TaskResult(host, "a100 nodes", f"{role} step {number}", Status.OK, type="file", role=role,
                              message="in sync")
            if drifted and role == "cuda" and number == 0:
                task = TaskResult(host, "a100 nodes", "cuda step 0", Status.WOULD_CHANGE, type="package",
                                  role=role, changes=[
                                      ChangeReport("install cuda-toolkit-12-8 (12.8.1-1)"),
                                      ChangeReport("write /etc/profile.d/cuda.sh",
                                                   diff="--- before\n+++ after\n-PATH=/usr/local/cuda-12.4/bin\n"
                                                        "+PATH=/usr/local/cuda-12.8/bin\n")])
            if failed and role == "fabricmanager" and number == 0:
                task = TaskResult(host, "a100 nodes", "fabricmanager step 0", Status.FAILED, type="service",
                                  role=role, error="nvidia-fabricmanager.service: failed to start\n"
                                                   "see journalctl -u nvidia-fabricmanager")
            if failed and role == "health" and number == 0:
                task = TaskResult(host, "a100 nodes", "health step 0", Status.FAILED, type="health", role=role,
                                  error="1 failure", findings=[Finding("xid", "failure", "Xid 79: fallen off the bus",
                                                                       gpu=3)])
            tasks.append(task)
    return tasks


def hosts_of(run: RunResult) -> list[str]:
    return list(run.hosts)


__all__ = ["HostResult", "ROLES", "host_name", "hosts_of", "synthetic_run"]
