"""One nvidia-smi call per host per run: the `--query-gpu` fields of every probe.

Every GPU probe reads the same fact (`gpu_readings()`, cache key `health:nvidia-smi`),
so the engine's batched round trip runs `nvidia-smi --query-gpu=<HEALTH_FIELDS>` once,
whichever probes the play has. The command runs under a timeout that kills its
process group: a hang is `driver_unresponsive`.

Older drivers do not know some fields (`clocks_event_reasons.active` was called
`clocks_throttle_reasons.active` before the R535 rename; `fabric.state` is recent).
nvidia-smi refuses the whole query then (`Field "X" is not a valid field to query.`),
so the command retries, in the same process group and timeout, without that field
(or with its old name). The header line says which fields came back; a dropped field
reads as "not reported" (None) and the probes say so.

On NVSwitch systems (an NVIDIA PCI bridge, class 0x0680, in sysfs) the same command
then runs `nvidia-smi nvlink -s`, after a `#nvlink` marker: one fact and one timeout
for both, so a wedged driver costs one timeout, not one per nvidia-smi call.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from gpuconf.engine.results import Finding
from gpuconf.facts.base import Fact, FactUnavailable, Output, shell
from gpuconf.facts.common import canonical_pci_address
from gpuconf.facts.nvidia import (ClockEventReasons, NvidiaSmiFailure, NvlinkStatus, QueryCsv,
                                  decode_clock_event_reasons, detect_nvidia_smi_failure, parse_nvlink_status,
                                  parse_query_csv)
from gpuconf.facts.nvidia.failure import DRIVER_NOT_LOADED, is_fatal
from gpuconf.facts.nvidia_smi import DRIVER_UNRESPONSIVE
from gpuconf.tasks.base import CheckContext, Unknown
from gpuconf.tasks.health.common import FAILURE, gpu_name

REASONS_FIELD = "clocks_event_reasons.active"
OLD_REASONS_FIELD = "clocks_throttle_reasons.active"
RENAMED = {REASONS_FIELD: OLD_REASONS_FIELD}

HEALTH_FIELDS = (
    "index", "pci.bus_id", "name", "persistence_mode", "pstate", "temperature.gpu", REASONS_FIELD,
    "utilization.gpu", "memory.used", "memory.total", "power.draw", "power.limit",
    "ecc.errors.uncorrected.volatile.total", "remapped_rows.pending", "remapped_rows.failure",
    "retired_pages.pending", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
    "pcie.link.width.max", "fabric.state", "fabric.status",
)
MAX_RETRIES = 8  # at most this many unknown fields are dropped before giving up

# Retry without (or with the old name of) a field the driver refuses. POSIX sh: the
# remote runner's shell may be dash.
_QUERY_SCRIPT = r"""f={fields}; n=0
while :; do
  out=$(nvidia-smi --query-gpu="$f" --format=csv,nounits 2>&1); rc=$?
  bad=$(printf '%s\n' "$out" | sed -n 's/^Field "\([^"]*\)" is not a valid field to query.*/\1/p' | head -n 1)
  n=$((n + 1))
  [ -n "$bad" ] && [ "$n" -le {retries} ] || break
  case "$bad" in {renames} *) new= ;; esac
  f=$(printf ',%s,' "$f" | sed "s/,$bad,/,$new,/; s/,,*/,/g; s/^,//; s/,$//")
done
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit $rc
for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] && [ "$(cat "$d/class" 2>/dev/null)" = 0x068000 ] || continue
  echo '{marker}'; nvidia-smi nvlink -s 2>&1; r=$?; echo; echo "{marker}-rc $r"; break
done
exit 0"""
NVLINK_MARKER = "#nvlink"


def query_command(fields: tuple[str, ...] = HEALTH_FIELDS) -> str:
    renames = " ".join(f"{shlex.quote(old)}) new={shlex.quote(new)} ;;" for old, new in RENAMED.items())
    return _QUERY_SCRIPT.format(fields=shlex.quote(",".join(fields)), retries=MAX_RETRIES, renames=renames,
                                marker=NVLINK_MARKER)


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
    nvlink: NvlinkStatus | None = None  # None: no NVSwitch, `nvlink -s` was not run

    def by_bus(self) -> dict[str, GpuReading]:
        return {g.bus_id: g for g in self.gpus if g.bus_id}


def _yes(value) -> bool | None:
    if value is None:
        return None
    text = str(value).strip().lower()
    return True if text in ("yes", "enabled", "active") else False if text in ("no", "disabled", "not active") \
        else None


def _int(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _text(value) -> str | None:
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
            clock_reasons=reasons, clock_reasons_mask=int(mask_text, 0) if reasons else None,
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
        ))
    returned = set(csv.fields) | ({REASONS_FIELD} if OLD_REASONS_FIELD in csv.fields else set())
    missing = tuple(f for f in HEALTH_FIELDS if csv.fields and f not in returned)
    return GpuReadings(tuple(gpus), csv.failure, missing)


def parse_readings(out: Output, timeout: float) -> GpuReadings | NvidiaSmiFailure:
    """The fact's parse: readings, a fatal nvidia-smi failure, or FactUnavailable on a hang."""
    if out.timed_out:
        raise FactUnavailable(f"{DRIVER_UNRESPONSIVE}: nvidia-smi did not answer within {timeout:g} s "
                              "(its process group was killed)")
    if out.rc == 127:
        return NvidiaSmiFailure(DRIVER_NOT_LOADED, "nvidia-smi: command not found (no NVIDIA driver installed)")
    query, marker, nvlink_text = out.stdout.partition(f"\n{NVLINK_MARKER}\n")
    failure = detect_nvidia_smi_failure(query)
    if is_fatal(failure):
        return failure
    csv = parse_query_csv(query)
    if out.rc != 0 and not csv.rows:
        raise FactUnavailable(f"nvidia-smi failed (exit {out.rc}): {(out.stderr or out.stdout).strip()[:300]}")
    readings = readings_from_csv(csv)
    if marker:
        nvlink_text = re.sub(rf"\n?{NVLINK_MARKER}-rc -?\d+\s*$", "", nvlink_text)
        readings = replace(readings, nvlink=parse_nvlink_status(nvlink_text))
    return readings


def gpu_readings(timeout: float = 10.0) -> Fact:
    """The shared fact. The key has no timeout in it: every probe shares one call."""
    return shell("health:nvidia-smi", query_command(), lambda out: parse_readings(out, timeout), timeout=timeout)


def require_readings(ctx: CheckContext, probe: str, timeout: float,
                     findings: list[Finding] | None = None) -> GpuReadings:
    """The readings, or `Unknown` with a failure finding naming why (`driver_unresponsive`,
    `driver_not_loaded`, ...). `findings` already made by the probe are kept."""
    try:
        value = ctx.get(gpu_readings(timeout))
    except FactUnavailable as exc:
        kind = DRIVER_UNRESPONSIVE if str(exc).startswith(DRIVER_UNRESPONSIVE) else "nvidia_smi_failed"
        raise _unknown(probe, kind, str(exc), findings) from None
    if isinstance(value, NvidiaSmiFailure):
        raise _unknown(probe, value.kind, f"{value.kind}: {value.message}", findings)
    return value


def _unknown(probe: str, kind: str, message: str, findings: list[Finding] | None) -> Unknown:
    finding = Finding(probe, FAILURE, f"{probe} cannot be read: {message}", value=kind)
    return Unknown(message, findings=[*(findings or []), finding])


def optional_readings(ctx: CheckContext, timeout: float) -> GpuReadings | None:
    """The readings when nvidia-smi answered, else None: for probes that only need
    nvidia-smi's GPU indexes and judge from sysfs or procfs."""
    try:
        value = ctx.get(gpu_readings(timeout))
    except FactUnavailable:
        return None
    return value if isinstance(value, GpuReadings) else None


def smi_indexes(readings: GpuReadings | None) -> dict[str, int]:
    """Bus id -> nvidia-smi index."""
    return {g.bus_id: g.index for g in readings.gpus if g.bus_id} if readings else {}
