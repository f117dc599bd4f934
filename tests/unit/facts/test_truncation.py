"""No cut of a real capture yields a confident wrong value.

Every capture under tests/fixtures/real that a parser test claims (``CASES`` of
tests/unit/*/test_parsers_*.py) is cut at 20 points and given to the parsers of its kind.
For each cut, a parser either says the result is incomplete (`gpuconf.facts.common.
incomplete`), or every value it does return is the value the whole capture gives at the
same place: a temperature cut from 45 to 4, a version cut to 535.1, a DKMS state cut to
"inst" are wrong values, never "not yet read". Values left out (GPUs after the cut, a
port not reached) are allowed: a cut log is an earlier log.

A cut exactly at a line end looks whole. Formats that close themselves (a closing line, or a
count declared before the rows: ``CLOSING``, listed in docs/driver-stack.md) are therefore
also cut at the line end just before each of their closing lines, and must say incomplete;
a capture that itself stops before its closing line must say so as it is.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable
from typing import Any

import pytest

from gpuconf.driver import releases
from gpuconf.errors import UsageError
from gpuconf.facts import cdi, dkms, evidence, imex, infiniband, kernel, mounts, nvidia, packages, redfish, rpm, systemd
from gpuconf.facts.common import incomplete
from gpuconf.facts.dcgm import parse_dcgmi_diag_json, parse_dcgmi_diag_table, parse_dcgmi_health
from gpuconf.facts.dcgmi import parse_dcgmi_discovery, parse_dcgmi_dmon
from gpuconf.facts.dnf import parse_dnf_error
from gpuconf.facts.nvidia.driver import find_api_mismatch, parse_proc_driver_params
from gpuconf.facts.nvidia.nvlink import parse_nvlink_info
from gpuconf.facts.nvidia.query import parse_query_excerpt
from tests.real import REAL
from tests.unit.facts.test_parsers_coverage import claimed_files

POINTS = 20

Parser = Callable[[str], Any]


@dataclasses.dataclass
class Refused:
    """What a parser that raises on output it cannot read whole gave: never a value."""

    incomplete: str


def refusing(parse: Callable[[str], Any], *errors: type[Exception]) -> Parser:
    def read(text: str) -> Any:
        try:
            return parse(text)
        except errors as exc:
            return Refused(str(exc) or type(exc).__name__)

    read.__name__ = getattr(parse, "__name__", "parse")
    return read


def _redfish(text: str) -> Any:
    """A payload's text as the resource the product reads it as: JSON cut short is refused."""
    import json
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise redfish.PayloadError(str(exc)) from None
    if "TaskState" in payload:
        return redfish.task(payload)
    if "Members" in payload:
        return redfish.members(payload)
    if "Attributes" in payload:
        return redfish.bios_settings(payload)
    if str(payload.get("@odata.type", "")).startswith("#UpdateService."):
        return redfish.update_service(payload)
    return redfish.software_inventory(payload)


def _manifest(text: str) -> Any:
    return releases.parse_manifest(text, "redistrib.json")

# capture (glob under fixtures/real) -> the parsers that read that kind of output
KINDS: list[tuple[str, tuple[Parser, ...]]] = [
    ("apt/apt-cache-policy-*", (packages.parse_apt_cache_policy,)),
    ("apt/apt-mark-hold-*", (packages.parse_apt_mark,)),
    ("dcgmi/dcgmi-diag-*-json-*", (parse_dcgmi_diag_json,)),
    ("dcgmi/dcgmi-diag-*", (parse_dcgmi_diag_table,)),
    ("dcgmi/dcgmi-health-*", (parse_dcgmi_health,)),
    ("dcgmi/dcgmi-discovery-*", (parse_dcgmi_discovery,)),
    ("dcgmi/dcgmi-dmon-*", (parse_dcgmi_dmon,)),
    ("dkms/*", (dkms.parse_dkms_status,)),
    ("dmesg/open-kernel-module-load-banner-*", (nvidia.parse_proc_driver_version,)),
    ("dmidecode/*", (evidence.parse_dmidecode,)),
    ("nvidia-bug-report/*", (evidence.parse_bug_report_header,)),
    ("nvidia-ctk/cdi-list-*", (refusing(cdi.parse_cdi_list, cdi.CdiListError),)),
    ("nvidia-ctk/cdi-generate-*", (cdi.parse_cdi_generate_log,)),
    ("nvidia-ctk/journal-nvidia-cdi-refresh-*", (cdi.parse_cdi_generate_log,)),
    ("nvidia-ctk/cdi-spec-*", (refusing(cdi.parse_cdi_spec, cdi.CdiSpecError),)),
    ("redist/redistrib_*.json", (refusing(_manifest, UsageError),)),
    ("dmesg/*", (kernel.parse_xid_events, kernel.parse_sxid_events, kernel.find_lost_gpus, kernel.find_lockups)),
    ("dnf/dnf-module-list-*", (rpm.parse_dnf_module_list,)),
    ("dnf/dnf-install-*", (parse_dnf_error,)),
    ("findmnt/*", (mounts.parse_findmnt_list,)),
    ("fstab/*", (mounts.parse_fstab,)),
    ("redfish/*", (refusing(_redfish, redfish.PayloadError),)),
    ("dnf/rpm-qa-*", (rpm.parse_rpm_qa,)),
    ("dpkg/*", (packages.parse_dpkg_l,)),
    ("fabricmanager/*", (nvidia.parse_fabric_manager_log, nvidia.find_version_mismatch)),
    ("ibstat/*", (infiniband.parse_ibstat,)),
    ("ibstatus/*", (infiniband.parse_ibstatus,)),
    ("ibv_devinfo/ibv-devinfo-l-*", (infiniband.parse_ibv_devinfo_list,)),
    ("ibv_devinfo/*", (infiniband.parse_ibv_devinfo,)),
    ("imex/imex-ctl-*", (imex.parse_imex_ctl_nodes,)),
    ("imex/imex-daemon-log-*", (imex.parse_imex_log,)),
    ("imex/proc-devices-*", (imex.parse_proc_devices,)),
    ("modinfo/modinfo-F-*", (nvidia.parse_modinfo_version,)),
    ("modinfo/*", (nvidia.parse_modinfo,)),
    ("nvcc/*", (nvidia.parse_nvcc_version,)),
    ("nvidia-smi/L-*", (nvidia.parse_gpu_list,)),
    ("nvidia-smi/default-*", (nvidia.parse_nvidia_smi_table,)),
    ("nvidia-smi/dmon-*", (nvidia.parse_dmon,)),
    ("nvidia-smi/failure-*", (nvidia.detect_nvidia_smi_failure,)),
    ("nvidia-smi/gpu-reset-*", (nvidia.parse_gpu_reset,)),
    ("nvidia-smi/nvlink-fw-*", (parse_nvlink_info,)),
    ("nvidia-smi/nvlink-s-*", (nvidia.parse_nvlink_status,)),
    ("nvidia-smi/q-fabric-*", (parse_query_excerpt,)),
    ("nvidia-smi/q-gsp-*", (parse_query_excerpt,)),
    ("nvidia-smi/q-*", (nvidia.parse_nvidia_smi_query,)),
    ("nvidia-smi/query-*", (nvidia.parse_query_csv,)),
    ("nvidia-smi/topo-*", (nvidia.parse_topology,)),
    ("nvidia-smi/version-*", (nvidia.parse_nvidia_smi_version,)),
    ("nvidia-smi-xml/*", (nvidia.parse_nvidia_smi_query_xml,)),
    ("proc-driver-nvidia-params/*", (parse_proc_driver_params,)),
    ("proc-driver-nvidia-version/*", (nvidia.parse_proc_driver_version,)),
    ("sysfs-infiniband/*-rate.txt", (infiniband.parse_rate,)),
    ("sysfs-infiniband/*state.txt", (infiniband.parse_numbered_state,)),
    ("sysfs-infiniband/*", (infiniband.parse_sysfs_value,)),
    ("syslog/*", (infiniband.parse_carrier_events,)),
    ("systemctl/journal-persistenced-*", (find_api_mismatch,)),
    ("systemctl/systemctl-is-active-*", (systemd.parse_is_active,)),
    ("systemctl/systemctl-list-units-*", (systemd.parse_list_units,)),
    ("systemctl/systemctl-show-*", (systemd.parse_systemctl_show,)),
    ("systemctl/systemctl-start-*", (systemd.parse_start_failure,)),
]
# Logs: a cut log is an earlier log, so its counts and flags (events seen so far) are the
# earlier log's; the strings it reads (versions, states, identifiers) must still be whole.
LOGS = ("dmesg/*", "fabricmanager/*", "imex/imex-daemon-log-*", "syslog/*", "systemctl/journal-*")
# sysfs attributes are read whole by the remote runner (a file read, no process, no
# stream), and stored without the kernel's newline: no cut of them can reach a parser.
UNCUTTABLE = ("sysfs-infiniband/*",)
# Free text a parser keeps as printed (a message, a problem line): cut text, not a value.
FREE_TEXT = {"message", "problems", "excerpt", "partial", "details", "line", "lines", "raw", "text", "incomplete",
             "complete", "missing", "reason", "error", "context", "description", "summary", "usage_error"}


def parsers_for(rel: str) -> tuple[Parser, ...]:
    return next((parsers for pattern, parsers in KINDS if fnmatch.fnmatch(rel, pattern)), ())


def flatten(value: Any, path: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every leaf value of a parser's result by its path (`gpus[3].temperature_c`)."""
    out = {} if out is None else out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items: Any = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    elif isinstance(value, dict):
        items = ((str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        out[path] = value
        return out
    for key, item in items:
        if key in FREE_TEXT:
            continue
        flatten(item, f"{path}.{key}" if path and not key.startswith("[") else path + key, out)
    return out


def wrong_values(cut: Any, whole: Any, log: bool = False) -> list[str]:
    """Values the cut's result gives that the whole capture's result does not."""
    if incomplete(cut):
        return []
    full = flatten(whole)
    return [f"{path}: {value!r} (whole: {full.get(path, '<absent>')!r})" for path, value in flatten(cut).items()
            if value not in (None, "unknown") and not (log and not isinstance(value, str))
            and (path not in full or full[path] != value)]


def captures() -> list[str]:
    return sorted(claimed_files())


def test_every_claimed_capture_has_its_parsers_here():
    assert [rel for rel in captures() if not parsers_for(rel)] == []


def cuttable() -> list[str]:
    return [rel for rel in captures() if not any(fnmatch.fnmatch(rel, pattern) for pattern in UNCUTTABLE)]


@pytest.mark.parametrize("rel", cuttable())
def test_no_cut_of_a_real_capture_gives_a_confident_wrong_value(rel):
    text = (REAL / rel).read_text(encoding="utf-8")
    log = any(fnmatch.fnmatch(rel, pattern) for pattern in LOGS)
    problems = []
    for parse in parsers_for(rel):
        whole = parse(text)
        for point in range(1, POINTS):
            cut = text[: len(text) * point // POINTS]
            for wrong in wrong_values(parse(cut), whole, log):
                problems.append(f"{parse.__name__} at {point}/{POINTS} ({len(cut)} chars): {wrong}")
    assert problems == []


# Formats with a closing line of their own, or a count declared before what it counts: capture
# (glob, first match wins) -> the parsers, and the lines that close it (a regex per line). Each
# capture is cut at the line end just before every such line. None: the kind has no closing line.
CLOSING: list[tuple[str, tuple[Parser, ...] | None, str]] = [
    # every device the header names has its row; the Legend ends with NV#; a NIC Legend names each NIC
    ("nvidia-smi/topo-*", (nvidia.parse_topology,), r"(GPU|NIC|mlx5_)\d+\s|Legend:|NIC Legend:|  NV#|  NIC\d+:"),
    ("dnf/dnf-module-list-*", (rpm.parse_dnf_module_list,), r"Hint:"),
    # the Processes block's closing border (every border before it is before the block's end too)
    ("nvidia-smi/default-*", (nvidia.parse_nvidia_smi_table,), r"\+-[-+]*\+\s*$"),
    ("nvidia-smi-xml/*", (nvidia.parse_nvidia_smi_query_xml,), r"</nvidia_smi_log>"),
    ("nvidia-smi/q-fabric-*", None, ""),     # excerpts of -q (grep, one GPU's section)
    ("nvidia-smi/q-gsp-*", None, ""),
    ("nvidia-smi/q-*", (nvidia.parse_nvidia_smi_query,), r"GPU [0-9A-Fa-f]{4,8}:"),   # "Attached GPUs : N" blocks
    ("systemctl/systemctl-list-units-*", (systemd.parse_list_units,), r"\S+ loaded units? listed"),
    ("dcgmi/dcgmi-diag-*-json-*", (parse_dcgmi_diag_json,), r"\}"),
    ("dcgmi/dcgmi-diag-*", (parse_dcgmi_diag_table,), r"\+[-=+]+\+\s*$"),
    ("dcgmi/dcgmi-health-*", (parse_dcgmi_health,), r"\}"),
    ("ibstat/*", (infiniband.parse_ibstat,), r"\s*(Port \d+:|Link layer:)"),     # "Number of ports: N"
    ("ibv_devinfo/ibv-devinfo-l-*", None, ""),
    ("ibv_devinfo/*", (infiniband.parse_ibv_devinfo,), r"\s+(port|state):"),      # "phys_port_cnt: N"
    ("imex/imex-ctl-*", (imex.parse_imex_ctl_nodes,), r"Domain State:"),
]


def closing_for(rel: str) -> tuple[tuple[Parser, ...], str] | None:
    found = next(((parsers, pattern) for glob, parsers, pattern in CLOSING if fnmatch.fnmatch(rel, glob)), None)
    return found if found and found[0] else None


@pytest.mark.parametrize("rel", [rel for rel in cuttable() if closing_for(rel)])
def test_a_cut_at_a_line_end_before_a_closing_line_is_incomplete(rel):
    text = (REAL / rel).read_text(encoding="utf-8")
    parsers, pattern = closing_for(rel)  # type: ignore[misc]
    lines = text.splitlines(keepends=True)
    closing = [n for n, line in enumerate(lines) if re.match(pattern, line)]
    problems = []
    for parse in parsers:
        if not closing and not incomplete(parse(text)):   # the capture stops before its first closing line
            problems.append(f"{parse.__name__}: the capture has none of its closing lines yet reads as whole")
        for n in closing:   # (a cut before the first line is no output at all: another state, not a cut)
            if n and not incomplete(parse("".join(lines[:n]))):
                problems.append(f"{parse.__name__}: cut before line {n + 1} ({lines[n].strip()[:40]!r}) reads as whole")
    assert problems == []
