"""What the remediation loop asks of the engine for a node: check it, converge it, read its GPU
serials, collect its evidence, claim it, and the node actions of the ladder other than the reboot
(gpuconf/remediate/command.py's EngineHooks carries them out; the tests give their own)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gpuconf.remediate import plan, reset
from gpuconf.remediate.decision import Decision


class Hooks(Protocol):
    def check(self, hosts: list[str]) -> dict[str, plan.Verdict]:
        """The read-only check (playbook and health gate) of these hosts."""
        ...

    def apply(self, host: str, reboot: Callable[[], None]) -> str | None:
        """Converge the host; a reboot a task needs calls `reboot` (the scheduler's, which may refuse
        with a GpuconfError). An error, or None."""
        ...

    def held(self, host: str) -> Decision | None:
        """The hold the host's last apply asks for: a failure that is the hardware's (a firmware
        update its BMC failed, gpuconf/remediate/firmware.py); None for any other outcome."""
        ...

    def serials(self, host: str) -> dict[str, str]:
        """The host's GPU serials by PCI address, for a hardware hold ({} when they cannot be read)."""
        ...

    def collect(self, host: str) -> str:
        """The host's evidence bundle (gpuconf collect): its path; a GpuconfError when it cannot be had."""
        ...

    def claim(self, host: str) -> Callable[[], None]:
        """The node's own remediation lock, held while this run works on it (two runs with other state
        directories never work on one node at once): its release; a GpuconfError naming the holder when
        another run has it."""
        ...

    def node_action(self, host: str, step: str, decision: Decision) -> reset.Outcome:
        """A node action of the ladder other than the reboot: "reset" (the GPUs), "imex" (the daemon)."""
        ...
