"""Heat and clocks: GPU temperature, and why clocks are held below their maximum."""
from __future__ import annotations

from pydantic import Field, model_validator

from gpuconf.facts.nvidia import CLOCK_EVENT_REASON_BITS
from gpuconf.results import Finding
from gpuconf.tasks.health.common import FAILURE, OK, WARNING, NvidiaSmiParams
from gpuconf.tasks.health.readings import GpuReading, GpuReadingsProbe


class TemperatureParams(NvidiaSmiParams):
    warn_c: float = Field(80, description="a warning at or above this many °C")
    fail_c: float = Field(85, description="a failure at or above this many °C (healthy is below it)")

    @model_validator(mode="after")
    def _ordered(self) -> TemperatureParams:
        if self.warn_c > self.fail_c:
            raise ValueError(f"warn_c ({self.warn_c:g}) must not be above fail_c ({self.fail_c:g})")
        return self


def judge_temperature(gpus: tuple[GpuReading, ...], params: TemperatureParams, probe: str = "temperature"
                      ) -> list[Finding]:
    findings = []
    for gpu in gpus:
        temp = gpu.temperature_c
        if temp is None:
            findings.append(Finding(probe, WARNING, f"{gpu.label}: temperature not reported", gpu=gpu.index,
                                    bus_id=gpu.bus_id))
            continue
        if temp >= params.fail_c:
            severity, note = FAILURE, f" (limit {params.fail_c:g} °C)"
        elif temp >= params.warn_c:
            severity, note = WARNING, f" (warning at {params.warn_c:g} °C)"
        else:
            severity, note = OK, ""
        findings.append(Finding(probe, severity, f"{gpu.label} at {temp:g} °C{note}", gpu=gpu.index,
                                bus_id=gpu.bus_id, value=temp))
    return findings


class TemperatureBelowLimit(GpuReadingsProbe[TemperatureParams]):
    """Each GPU's temperature (`temperature.gpu`) is below `fail_c` (85 °C): a failure at
    or above it, a warning from `warn_c` (80 °C)."""

    name = "health_temperature"
    probe = "temperature"
    Params = TemperatureParams

    def judge_gpus(self, params: TemperatureParams, gpus: tuple[GpuReading, ...]) -> list[Finding]:
        return judge_temperature(gpus, params, self.probe)


REASON_NAMES = tuple(CLOCK_EVENT_REASON_BITS)
OK_REASONS = ["gpu_idle", "sw_power_cap"]
FAILURE_REASONS = ["hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"]


class ClockParams(NvidiaSmiParams):
    ok_reasons: list[str] = Field(default_factory=lambda: list(OK_REASONS),
                                  description="reasons that are normal (idle, the software power cap)")
    failure_reasons: list[str] = Field(default_factory=lambda: list(FAILURE_REASONS),
                                       description="reasons that are failures (HW slowdown, thermal); "
                                       "every other active reason is a warning")

    @model_validator(mode="after")
    def _known(self) -> ClockParams:
        for name in self.ok_reasons + self.failure_reasons:
            if name not in REASON_NAMES:
                raise ValueError(f"unknown clock event reason '{name}' (known: {', '.join(REASON_NAMES)})")
        return self


def judge_clocks(gpus: tuple[GpuReading, ...], params: ClockParams, probe: str = "clock_events") -> list[Finding]:
    findings = []
    for gpu in gpus:
        if gpu.clock_reasons is None:
            findings.append(Finding(probe, OK, f"{gpu.label}: clock event reasons not reported", gpu=gpu.index,
                                    bus_id=gpu.bus_id))
            continue
        active = list(gpu.clock_reasons.active)
        known = sum(CLOCK_EVENT_REASON_BITS.values())
        if gpu.clock_reasons_mask is not None and gpu.clock_reasons_mask & ~known:
            active.append(f"unknown bits 0x{gpu.clock_reasons_mask & ~known:x}")
        failures = [r for r in active if r in params.failure_reasons]
        warnings = [r for r in active if r not in params.failure_reasons and r not in params.ok_reasons]
        severity = FAILURE if failures else WARNING if warnings else OK
        shown = ", ".join(failures + warnings) if severity != OK else (", ".join(active) or "none")
        verb = {FAILURE: "clocks held down by", WARNING: "clocks held down by", OK: "clock event reasons:"}[severity]
        findings.append(Finding(probe, severity, f"{gpu.label} {verb} {shown}", gpu=gpu.index, bus_id=gpu.bus_id,
                                value=f"0x{gpu.clock_reasons_mask:x}" if gpu.clock_reasons_mask is not None
                                else None))
    return findings


class ClocksNotThrottled(GpuReadingsProbe[ClockParams]):
    """No GPU's clocks are held down for a bad reason (`clocks_event_reasons.active`,
    `clocks_throttle_reasons.active` on drivers before the rename). Idle and the
    software power cap are normal; HW slowdown, HW/SW thermal slowdown and the HW power
    brake are failures; any other active reason (application clocks, sync boost,
    display clocks, unknown bits) is a warning."""

    name = "health_clocks"
    probe = "clock_events"
    Params = ClockParams

    def judge_gpus(self, params: ClockParams, gpus: tuple[GpuReading, ...]) -> list[Finding]:
        return judge_clocks(gpus, params, self.probe)
