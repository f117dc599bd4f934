"""A scheduler and hooks for the remediation loop's tests: no hosts, no cluster.

FakeSlurm keeps each node's state as scontrol would print it and counts, at every change,
how many nodes are out of service: the budget is asserted on that, not on what the loop says.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuconf.connection.base import HostBusy
from gpuconf.errors import GpuconfError
from gpuconf.remediate import plan
from gpuconf.remediate.decision import Decision
from gpuconf.remediate.reset import Outcome
from gpuconf.scheduler.interface import Node
from gpuconf.scheduler.slurm import reason_before_reboot, rewritten_by_reboot


@dataclass
class FakeNode:
    base: str = "IDLE"
    flags: set[str] = field(default_factory=set)
    reason: str | None = None
    jobs: int = 0  # reads of the node's state before its jobs end (-1: never)
    silent: int = 0  # reads before slurmctld has pinged a node resumed from DOWN (IDLE*, not in service)


class FakeSlurm:
    name = "slurm"
    rewritten_by_reboot = staticmethod(rewritten_by_reboot)  # the scheduler's own rule, as Slurm's
    reason_before_reboot = staticmethod(reason_before_reboot)

    def __init__(self, names: Iterable[str]):
        self.state = {n: FakeNode() for n in names}
        self.calls: list[tuple[str, ...]] = []
        self.max_out = 0  # the most nodes out of service right after a change
        self.max_seen = 0  # ... at any read, as sinfo sampled between changes would see
        self.lock = threading.Lock()
        self.on_read = None  # called before each read of the states (an operator acting meanwhile)

    def node(self, name: str) -> Node:
        fake = self.state[name]
        base = fake.base
        if base == "IDLE" and fake.jobs:
            base = "MIXED"
        if fake.silent:
            base += "*"
        return Node(name, "+".join([base, *sorted(fake.flags)]), fake.reason)

    def out_of_service(self) -> int:
        return sum(1 for n in self.state if not self.node(n).in_service)

    def _changed(self) -> None:
        self.max_out = max(self.max_out, self.out_of_service())
        self.max_seen = max(self.max_seen, self.out_of_service())

    def nodes(self, names: Iterable[str]) -> dict[str, Node]:
        if self.on_read is not None:
            self.on_read()
        with self.lock:
            self.max_seen = max(self.max_seen, self.out_of_service())
            for fake in self.state.values():
                if fake.jobs > 0:
                    fake.jobs -= 1  # time passes: jobs end
                if fake.silent > 0:
                    fake.silent -= 1
            return {n: self.node(n) for n in names if n in self.state}

    def drain(self, node: str, reason: str, exact: bool = False) -> None:
        with self.lock:
            self.calls.append(("drain", node, reason))
            self.state[node].flags.add("DRAIN")
            self.state[node].reason = reason
            self._changed()

    def resume(self, node: str) -> None:
        with self.lock:
            self.calls.append(("resume", node))
            fake = self.state[node]
            fake.flags.discard("DRAIN")
            if fake.base == "DOWN":
                fake.base, fake.silent = "IDLE", 3  # as real Slurm: IDLE* until it has pinged slurmd
            fake.reason = None
            self._changed()

    def reboot(self, node: str) -> None:
        """As a plain scontrol reboot (no reason=) of a drained node: Slurm 22.05.8's
        set_node_reboot_reason (src/slurmctld/node_mgr.c) appends " : reboot issued" to the reason,
        or, when the reason already holds "reboot issued", replaces it with the bare words; the node
        comes back drained, not responding until slurmctld has pinged it."""
        with self.lock:
            self.calls.append(("reboot", node))
            fake = self.state[node]
            fake.reason = "reboot issued" if fake.reason is None or "reboot issued" in fake.reason \
                else f"{fake.reason} : reboot issued"
            fake.silent = 2
            self._changed()

    def hand_drain(self, node: str, reason: str, base: str = "IDLE") -> None:
        self.state[node].flags.add("DRAIN")
        self.state[node].base = base
        self.state[node].reason = reason


HOST_BUSY = "held by"


class FakeHooks:
    """Hosts drift until applied; a broken host stays unhealthy whatever apply does."""

    def __init__(self, slurm: FakeSlurm, drifted: Iterable[str] = (), broken: Iterable[str] = (),
                 reboot: bool = True):
        self.slurm = slurm
        self.drifted, self.broken = set(drifted), set(broken)
        self.reboot = reboot
        self.applied: list[str] = []
        self.checked: list[list[str]] = []
        self.during_apply = None  # called inside apply, before its reboot (a test's interrupt, an operator)
        self.after_apply = None  # called at the end of apply, after its reboot
        self.during_check = None  # called in each check after the first (the verifications)
        self.faults: dict[str, Decision] = {}  # a catalog fault the health probes find, until the node reboots
        self.sticky: set[str] = set()  # ... or for good: the fault survives the reboot
        self.serial_numbers: dict[str, dict[str, str]] = {}  # nvidia-smi's serials, by PCI address
        self.actions: list[tuple[str, str]] = []  # (host, "reset" | "imex"), as the ladder took them
        self.refuse: set[str] = set()  # hosts whose GPU reset nvidia-smi refuses (a process holds the GPU)
        self.collected: list[str] = []  # hosts whose evidence bundle was collected
        self.hardware: dict[str, Decision] = {}  # hosts whose apply fails as the hardware's (a firmware update)
        self.during_action = None  # called inside a node action (a reset, an IMEX restart): an operator, a signal
        self.no_gpus: set[str] = set()  # hosts whose check names no GPU (login, storage nodes)
        self.locks: dict[str, str] = {}  # the nodes' own remediation locks: host -> holder (shared between runs)

    def check(self, hosts: list[str]) -> dict[str, plan.Verdict]:
        self.checked.append(list(hosts))
        if self.during_check is not None and len(self.checked) > 1:  # a verification
            self.during_check()
        result = {}
        for host in hosts:
            result[host] = dataclasses.replace(self._verdict(host), gpus=0 if host in self.no_gpus else 1)
        return result

    def _verdict(self, host: str) -> plan.Verdict:
        rebooted = ("reboot", host) in self.slurm.calls
        reset_done = (host, "reset") in self.actions and host not in self.refuse \
            and host in self.faults and self.faults[host].kind in ("reset", "app")
        if host in self.faults and (host in self.sticky or not (rebooted or reset_done)):
            return plan.Verdict(host, False, f"gpuconf: failed: {self.faults[host].finding}", cause="fault",
                                decision=self.faults[host])
        if host in self.broken:
            return plan.Verdict(host, False, "gpuconf: failed: Xid errors: GPU 0: Xid 79", cause="fault")
        if host in self.drifted:
            return plan.Verdict(host, False, "gpuconf: drift: /etc/gpu.conf content", cause="drift")
        return plan.Verdict(host, True)

    def claim(self, host: str):
        holder = f"fake run {id(self)}"
        if self.locks.setdefault(host, holder) != holder:
            raise HostBusy(f"{HOST_BUSY} {self.locks[host]}")
        return lambda: self.locks.pop(host, None)

    def serials(self, host: str) -> dict[str, str]:
        return self.serial_numbers.get(host, {})

    def held(self, host: str) -> Decision | None:
        return self.hardware.get(host)

    def collect(self, host: str) -> str:
        assert not self.slurm.node(host).in_service, "collected in service"  # a hold's may still run jobs
        self.collected.append(host)
        return f"/state/bundles/{host}-20261207T100000Z.tar.gz"

    def node_action(self, host: str, step: str, decision: Decision) -> Outcome:
        assert not self.slurm.node(host).in_service and not self.slurm.node(host).busy, f"{step} in service"
        self.actions.append((host, step))
        if self.during_action is not None:
            self.during_action()
        if step == "reset" and host in self.refuse:
            return Outcome(False, "The following GPUs could not be reset:; GPU 00000000:3B:00.0: In use by another "
                           "client", refused=True)
        return Outcome(True, "GPU 00000000:3B:00.0 was successfully reset." if step == "reset" else "READY")

    def apply(self, host: str, reboot) -> str | None:
        self.applied.append(host)
        assert not self.slurm.node(host).in_service, "applied to a node in service"
        assert not self.slurm.node(host).busy, "applied while jobs ran"
        if self.during_apply is not None:
            self.during_apply()
        if host in self.hardware:
            return f"apply: firmware: {self.hardware[host].finding}"
        self.drifted.discard(host)
        if self.reboot:
            try:
                reboot()  # as the engine's reboot task: a refusal fails the task, and the apply
            except GpuconfError as exc:
                return f"apply: Reboot: {exc}"
        if self.after_apply is not None:
            self.after_apply()
        return None
