"""One nvidia-smi call per host per run: the `--query-gpu` fields of every probe.

Every GPU probe reads the same fact (`gpu_readings()`, cache key `health:nvidia-smi`),
and it merges with every other `--query-gpu` fact of the batch (gpuconf/facts/nvidia_smi.py),
so the engine's batched round trip runs one `nvidia-smi --query-gpu=<all their fields>`,
whichever probes and tasks the play has. The command runs under a timeout that kills its
process group: a hang is `driver_unresponsive`.

Older drivers do not know some fields (`clocks_event_reasons.active` was called
`clocks_throttle_reasons.active` before the R535 rename; `fabric.state` is recent).
nvidia-smi refuses the whole query then (`Field "X" is not a valid field to query.`),
so the remote runner reruns it, within the same timeout, without that field (or with
its old name): `drop_refused` (gpuconf/facts/nvidia_smi.py), inside the one query. The
header line says which fields came back; a dropped field reads as "not reported" (None)
and the probes say so.

`nvidia-smi nvlink -s` is a read of its own (`nvlink_status()`), declared by the NVLink
probe only. The runner runs a batch's reads at the same time, so a wedged driver costs
one timeout, not one per nvidia-smi call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from typing_extensions import TypeVar

from gpuconf.facts.base import Fact, FactUnavailable, Output, command
from gpuconf.facts.common import canonical_pci_address, incomplete
from gpuconf.facts.nvidia import (
    ClockEventReasons,
    NvidiaSmiFailure,
    NvlinkStatus,
    QueryCsv,
    decode_clock_event_reasons,
    detect_nvidia_smi_failure,
    parse_nvlink_status,
    parse_query_csv,
)
from gpuconf.facts.nvidia.failure import DRIVER_NOT_LOADED, DRIVER_UNRESPONSIVE, is_fatal
from gpuconf.facts.nvidia_smi import query_fields
from gpuconf.results import Finding
from gpuconf.tasks.base import Facts, Unknown
from gpuconf.tasks.health.common import FAILURE, HealthProbe, NvidiaSmiParams, gpu_name

REASONS_FIELD = "clocks_event_reasons.active"
OLD_REASONS_FIELD = "clocks_throttle_reasons.active"
RENAMED = {REASONS_FIELD: OLD_REASONS_FIELD}

HEALTH_FIELDS = (
    "index", "pci.bus_id", "name", "persistence_mode", "pstate", "temperature.gpu", REASONS_FIELD,
    "utilization.gpu", "memory.used", "memory.total", "power.draw", "power.limit",
    "ecc.errors.uncorrected.volatile.total", "remapped_rows.pending", "remapped_rows.failure",
    "retired_pages.pending", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
    "pcie.link.width.max", "fabric.state", "fabric.status", "gpu_recovery_action",
)
INCOMPLETE = "incomplete"   # a finding's value when the output it judges was cut short
MAX_RETRIES = 8  # at most this many unknown fields are dropped before giving up
QUERY = "--query-gpu="


@dataclass(frozen=True)
class GpuReading:
    """What the probes judge about one GPU. None means "not reported" (`[N/A]`, a field
    this driver does not know, a GPU without ECC). `bus_id` is the canonical sysfs
    spelling (`0000:07:00.0`), the same in every finding."""

    index: int
    bus_id: str | None
    name: str | None = None
    persistence: bool | None = None
    pstate: str | None = None
    temperature_c: float | None = None
    clock_reasons: ClockEventReasons | None = None
    clock_reasons_mask: int | None = None
    utilization_percent: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    ecc_uncorrected_volatile: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    retired_pages_pending: bool | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    recovery_action: str | None = None  # as printed: None, Reset, Reboot, Drain P2P ...

    @property
    def label(self) -> str:
        return gpu_name(self.index, self.bus_id)


@dataclass(frozen=True)
class GpuReadings:
    """Every GPU nvidia-smi reported. `failure` is a partial failure (a lost GPU) when
    rows are present; `missing_fields` are fields this driver refused."""

    gpus: tuple[GpuReading, ...]
    failure: NvidiaSmiFailure | None = None
    missing_fields: tuple[str, ...] = ()
    incomplete: str = ""  # the output was cut short: nothing in it is judged (gpuconf.facts.common)

    def by_bus(self) -> dict[str, GpuReading]:
        return {g.bus_id: g for g in self.gpus if g.bus_id}


def _yes(value: object) -> bool | None:
    if value is None:
        return None
    text = str(value).strip().lower()
    return True if text in ("yes", "enabled", "active") else False if text in ("no", "disabled", "not active") \
        else None


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def readings_from_csv(csv: QueryCsv) -> GpuReadings:
    """Readings from a parsed `--query-gpu` CSV (any field subset, header or field list)."""
    gpus = []
    for position, row in enumerate(csv.rows):
        mask_text = row.get(REASONS_FIELD, row.get(OLD_REASONS_FIELD))
        reasons = decode_clock_event_reasons(mask_text) if isinstance(mask_text, str) else None
        index = _int(row.get("index"))
        gpus.append(GpuReading(
            index=position if index is None else index,
            bus_id=canonical_pci_address(_text(row.get("pci.bus_id"))),
            name=_text(row.get("name")), persistence=_yes(row.get("persistence_mode")),
            pstate=_text(row.get("pstate")), temperature_c=_number(row.get("temperature.gpu")),
            clock_reasons=reasons,
            clock_reasons_mask=int(mask_text, 0) if reasons and isinstance(mask_text, str) else None,
            utilization_percent=_number(row.get("utilization.gpu")),
            memory_used_mib=_number(row.get("memory.used")), memory_total_mib=_number(row.get("memory.total")),
            power_draw_w=_number(row.get("power.draw")), power_limit_w=_number(row.get("power.limit")),
            ecc_uncorrected_volatile=_int(row.get("ecc.errors.uncorrected.volatile.total")),
            remapped_rows_pending=_yes(row.get("remapped_rows.pending")),
            remapped_rows_failure=_yes(row.get("remapped_rows.failure")),
            retired_pages_pending=_yes(row.get("retired_pages.pending")),
            pcie_gen_current=_int(row.get("pcie.link.gen.current")), pcie_gen_max=_int(row.get("pcie.link.gen.max")),
            pcie_width_current=_int(row.get("pcie.link.width.current")),
            pcie_width_max=_int(row.get("pcie.link.width.max")),
            fabric_state=_text(row.get("fabric.state")), fabric_status=_text(row.get("fabric.status")),
            recovery_action=_text(row.get("gpu_recovery_action")),
        ))
    returned = set(csv.fields) | ({REASONS_FIELD} if OLD_REASONS_FIELD in csv.fields else set())
    missing = tuple(f for f in HEALTH_FIELDS if csv.fields and f not in returned)
    return GpuReadings(tuple(gpus), csv.failure, missing, incomplete(csv))


def _unresponsive(out: Output, timeout: float, what: str = "nvidia-smi") -> FactUnavailable:
    return FactUnavailable(f"{DRIVER_UNRESPONSIVE}: {what} did not answer within {out.timeout or timeout:g} s "
                           "(its process group was killed)")


def parse_readings(out: Output, timeout: float) -> GpuReadings | NvidiaSmiFailure:
    """The fact's parse: readings, a fatal nvidia-smi failure, or FactUnavailable on a hang."""
    if out.timed_out:
        raise _unresponsive(out, timeout)
    if out.rc == 127:
        return NvidiaSmiFailure(DRIVER_NOT_LOADED, "nvidia-smi: command not found (no NVIDIA driver installed)")
    # nvidia-smi prints some failures (a lost GPU) on stderr, before or among the rows
    text = (out.stderr.rstrip("\n") + "\n" if out.stderr.strip() else "") + out.stdout
    failure = detect_nvidia_smi_failure(text)
    if failure is not None and is_fatal(failure):
        return failure
    csv = parse_query_csv(text)
    if out.rc != 0 and not csv.rows:
        raise FactUnavailable(f"nvidia-smi failed (exit {out.rc}): {text.strip()[:300]}")
    return readings_from_csv(csv)


def gpu_readings(timeout: float = 10.0) -> Fact[GpuReadings | NvidiaSmiFailure]:
    """The shared fact. The key has no timeout in it: every probe shares one call."""
    return query_fields(HEALTH_FIELDS, lambda out: parse_readings(out, timeout), timeout=timeout,
                        key="health:nvidia-smi", renames=RENAMED, most=MAX_RETRIES)


def parse_nvlink(out: Output, timeout: float) -> NvlinkStatus:
    if out.timed_out:
        raise _unresponsive(out, timeout, "nvidia-smi nvlink -s")
    text = (out.stderr.rstrip("\n") + "\n" if out.stderr.strip() else "") + out.stdout
    return parse_nvlink_status(text)


def nvlink_status(timeout: float = 10.0) -> Fact[NvlinkStatus]:
    """`nvidia-smi nvlink -s`: every GPU's NVLinks (NVSwitch systems)."""
    return command(["nvidia-smi", "nvlink", "-s"], lambda out: parse_nvlink(out, timeout), timeout=timeout,
                   key="health:nvlink")


def require_readings(facts: Facts, probe: str, timeout: float,
                     findings: list[Finding] | None = None) -> GpuReadings:
    """The readings, or `Unknown` with a failure finding naming why (`driver_unresponsive`,
    `driver_not_loaded`, ...). `findings` already made by the probe are kept."""
    try:
        value: GpuReadings | NvidiaSmiFailure = facts[gpu_readings(timeout)]
    except FactUnavailable as exc:
        raise unknown_finding(probe, str(exc), findings) from None
    if isinstance(value, NvidiaSmiFailure):
        raise _unknown(probe, value.kind, f"{value.kind}: {value.message}", findings)
    if value.incomplete:
        raise _unknown(probe, INCOMPLETE, f"nvidia-smi's output is incomplete: {value.incomplete}", findings)
    return value


def unknown_finding(probe: str, message: str, findings: list[Finding] | None) -> Unknown:
    """`Unknown` for an nvidia-smi read that failed (FactUnavailable's message)."""
    kind = DRIVER_UNRESPONSIVE if message.startswith(DRIVER_UNRESPONSIVE) else "nvidia_smi_failed"
    return _unknown(probe, kind, message, findings)


def _unknown(probe: str, kind: str, message: str, findings: list[Finding] | None) -> Unknown:
    finding = Finding(probe, FAILURE, f"{probe} cannot be read: {message}", value=kind)
    return Unknown(message, findings=[*(findings or []), finding])


def optional_readings(facts: Facts, timeout: float) -> GpuReadings | None:
    """The readings when nvidia-smi answered, else None: for probes that only need
    nvidia-smi's GPU indexes and judge from sysfs or procfs."""
    try:
        value = facts[gpu_readings(timeout)]
    except FactUnavailable:
        return None
    return value if isinstance(value, GpuReadings) and not value.incomplete else None


def smi_indexes(readings: GpuReadings | None) -> dict[str, int]:
    """Bus id -> nvidia-smi index."""
    return {g.bus_id: g.index for g in readings.gpus if g.bus_id} if readings else {}


# a readings probe's parameters: nvidia-smi's timeout at least
R = TypeVar("R", bound=NvidiaSmiParams, default=Any)


class GpuReadingsProbe(HealthProbe[R]):
    """A probe judged on the GPUs' readings of the one merged nvidia-smi query: it reads them,
    requires them (`unknown` with a failure finding when nvidia-smi cannot tell: require_readings)
    and judges the GPUs (`judge_gpus`). The shape six probes had each spelled out."""

    def reads(self, params: R) -> list[Fact]:
        return [gpu_readings(params.nvidia_smi_timeout)]

    def readings(self, params: R, facts: Facts) -> GpuReadings:
        return require_readings(facts, self.probe, params.nvidia_smi_timeout)

    def judge(self, params: R, facts: Facts) -> list[Finding]:
        return self.judge_gpus(params, self.readings(params, facts).gpus)

    def judge_gpus(self, params: R, gpus: tuple[GpuReading, ...]) -> list[Finding]:
        raise NotImplementedError
