"""Why clocks are below maximum: NVML's clock event reasons (formerly "throttle" reasons), by name.

Shared by `nvidia-smi -q`, `-q -x` and `--query-gpu=clocks_event_reasons.active`; a module of its
own so that the health probes, which read only the last, do not load `-q`'s whole model.
"""
from __future__ import annotations

from dataclasses import dataclass

# Canonical clock event (formerly "throttle") reason names, shared by -q, -q -x and
# --query-gpu=clocks_event_reasons.*. The bit values are NVML's nvmlClocksEventReason*.
CLOCK_EVENT_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


@dataclass(frozen=True)
class ClockEventReasons:
    """Why clocks are below maximum: canonical names of the active and inactive reasons.

    Names are the keys of :data:`CLOCK_EVENT_REASON_BITS`. Labels this parser does not
    know (a newer driver, a mangled capture) are kept in ``unrecognised`` as snake_case.
    """

    active: tuple[str, ...]
    inactive: tuple[str, ...]
    unrecognised: tuple[str, ...] = ()

    def is_active(self, name: str) -> bool | None:
        """True/False when the reason was reported, None when it was not in the output."""
        if name in self.active:
            return True
        if name in self.inactive:
            return False
        return None


def decode_clock_event_reasons(mask: int | str | None) -> ClockEventReasons | None:
    """Decode ``clocks_event_reasons.active`` (``0x0000000000000001``) into reason names."""
    if mask is None:
        return None
    if isinstance(mask, str):
        try:
            mask = int(mask.strip(), 0)
        except ValueError:
            return None
    active = tuple(name for name, bit in CLOCK_EVENT_REASON_BITS.items() if mask & bit)
    inactive = tuple(name for name, bit in CLOCK_EVENT_REASON_BITS.items() if not mask & bit)
    return ClockEventReasons(active=active, inactive=inactive)
