"""What only a person asks for: `gpuconf hardware` (the hardware holds, for an RMA request) and
`gpuconf remediate --reset-breaker` (the circuit breaker closed again, once the cause is known)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuconf.remediate.breaker import state
from gpuconf.remediate.history import FILE, RESET, History, default_state_dir
from gpuconf.remediate.hold import listing
from gpuconf.scheduler.interface import SchedulerError


def _state_dir(args: Any) -> Path:
    return Path(args.state_dir).expanduser() if args.state_dir else default_state_dir()


def hardware(args: Any) -> int:
    """The nodes drained as hardware holds: serial, PCI address, Xid or SXid, count, first and last
    seen, the evidence bundle; with --scheduler, whether each is still drained as one."""
    path = _state_dir(args)
    if not (path / FILE).exists():
        print('{"holds": []}' if args.format == "json" else f"no hardware hold recorded (no history at {path / FILE})")
        return 0
    with History(path, create=False) as store:
        holds = store.holds()
    held_now = None
    if args.scheduler and holds:
        from gpuconf.scheduler.slurm import Slurm

        try:
            nodes = Slurm().nodes({h.node for h in holds})
        except SchedulerError as exc:
            raise SchedulerError(f"{exc} (gpuconf hardware lists the history without --scheduler)") from None
        held_now = {name: node.hardware_hold for name, node in nodes.items()}
    print(listing(holds, held_now, args.format == "json"))
    return 0


def reset_breaker(args: Any) -> int:
    """Close the circuit breaker: a person has looked at the cause. What failed before now no longer counts."""
    path = _state_dir(args)
    with History(path) as store:
        current = state(store.breaker_events())
        if current.tripped is None:  # a reset would also wipe the count towards the next trip
            print("circuit breaker not tripped: nothing to reset (what failed within the window still counts)")
            return 0
        store.breaker_event(RESET, "gpuconf remediate --reset-breaker")
    print(f"circuit breaker reset (it was tripped: {current.tripped}); the failures before now no longer count")
    return 0
