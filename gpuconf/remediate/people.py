"""What only a person asks for: `gpuconf hardware` (the hardware holds, for an RMA request) and
`gpuconf remediate --reset-breaker` (the circuit breaker closed again, once the cause is known)."""
from __future__ import annotations

from pathlib import Path

from gpuconf.remediate.breaker import state
from gpuconf.remediate.history import FILE, RESET, History
from gpuconf.remediate.hold import listing
from gpuconf.scheduler.interface import SchedulerError


def hardware(path: Path, as_json: bool = False, ask_scheduler: bool = False) -> int:
    """The nodes drained as hardware holds in the state directory `path`: serial, PCI address, Xid
    or SXid, count, first and last seen, the evidence bundle; `ask_scheduler` (--scheduler):
    whether each is still drained as one."""
    if not (path / FILE).exists():
        print('{"holds": []}' if as_json else f"no hardware hold recorded (no history at {path / FILE})")
        return 0
    with History(path, create=False) as store:
        holds = store.holds()
    held_now = None
    if ask_scheduler and holds:
        from gpuconf.scheduler.slurm import Slurm

        try:
            nodes = Slurm().nodes({h.node for h in holds})
        except SchedulerError as exc:
            raise SchedulerError(f"{exc} (gpuconf hardware lists the history without --scheduler)") from None
        held_now = {name: node.hardware_hold for name, node in nodes.items()}
    print(listing(holds, held_now, as_json))
    return 0


def reset_breaker(path: Path) -> int:
    """Close the circuit breaker of the state directory `path`: a person has looked at the cause.
    What failed before now no longer counts."""
    with History(path) as store:
        current = state(store.breaker_events())
        if current.tripped is None:  # a reset would also wipe the count towards the next trip
            print("circuit breaker not tripped: nothing to reset (what failed within the window still counts)")
            return 0
        store.breaker_event(RESET, "gpuconf remediate --reset-breaker")
    print(f"circuit breaker reset (it was tripped: {current.tripped}); the failures before now no longer count")
    return 0
