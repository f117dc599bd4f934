"""`gpuconf facts HOST SUBJECT...`: what a host's tools say about one subject, parsed.

Ansible's `setup` gathers everything; here each subject is a few declared reads (files,
globs, argv lists of read-only programs: `gpuconf/facts/base.py`), gathered in one round
trip, each parsed by the parser its tool's output has (tested on real captures under
`tests/fixtures/real/`). A tool the host lacks is reported as such (`exit 127`), never as
an empty answer, and a tool that hangs is cut at its timeout.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpuconf.facts.base import Fact, FileState, Output, command, file_glob, file_state
from gpuconf.facts.cdi import parse_cdi_generate_log
from gpuconf.facts.dcgm import parse_dcgmi_diag_table, parse_dcgmi_health
from gpuconf.facts.dcgmi import parse_dcgmi_discovery, parse_dcgmi_dmon
from gpuconf.facts.evidence import parse_dmidecode
from gpuconf.facts.firmware import bios_firmware, gpu_firmware, hca_firmware
from gpuconf.facts.imex import parse_imex_ctl_nodes, parse_imex_log, parse_proc_devices
from gpuconf.facts.infiniband import parse_ibstat
from gpuconf.facts.infiniband_sysfs import parse_carrier_events, parse_sysfs_infiniband_files
from gpuconf.facts.infiniband_verbs import parse_ibstatus, parse_ibv_devinfo, parse_ibv_devinfo_list
from gpuconf.facts.kernel_log import find_nouveau, split_kernel_log
from gpuconf.facts.nvidia.csv import parse_dmon
from gpuconf.facts.nvidia.driver import (
    find_api_mismatch,
    parse_modinfo,
    parse_modinfo_version,
    parse_proc_driver_params,
    parse_proc_driver_version,
)
from gpuconf.facts.nvidia.fabricmanager import find_version_mismatch, parse_fabric_manager_log
from gpuconf.facts.nvidia.listing import parse_gpu_list, parse_nvidia_smi_version
from gpuconf.facts.nvidia.nvlink import parse_nvlink_info, parse_nvlink_status
from gpuconf.facts.nvidia.query import parse_nvidia_smi_query, parse_nvidia_smi_query_xml, parse_query_excerpt
from gpuconf.facts.nvidia.table import parse_nvidia_smi_table
from gpuconf.facts.nvidia.topology import parse_topology
from gpuconf.facts.packages import parse_apt_cache_policy, parse_apt_mark_showhold, parse_dpkg_l
from gpuconf.facts.rpm import parse_dnf_module_list, parse_rpm_qa
from gpuconf.facts.systemd import parse_is_enabled, parse_list_units, parse_systemctl_show_all
from gpuconf.files.values import JSONValue

# dcgmi dmon's fields: temperature (150), power (155), GPU and memory use (203, 204), framebuffer used (252),
# volatile single- and double-bit ECC (310, 311)
DMON_FIELDS = "150,155,203,204,252,310,311"
NVIDIA_UNITS = ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-imex", "nvidia-dcgm", "nvlsm")


def plain(value: object) -> JSONValue:
    """A parsed value as JSON can hold it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):   # a named tuple (DpkgPackage)
        return {name: plain(getattr(value, name)) for name in value._fields}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def tool(argv: list[str], parse: Callable[[str], object], timeout: float = 20.0, label: str = "") -> Fact[object]:
    """A program's output parsed, or why there is none (not installed, failed, hung)."""
    def read(out: Output) -> object:
        if out.timed_out:
            return {"unavailable": f"{argv[0]} did not answer within {timeout:g} s"}
        if out.rc == 127:
            return {"unavailable": f"{argv[0]} is not installed"}
        if out.rc != 0 and not out.stdout.strip():
            return {"unavailable": f"{argv[0]} failed (exit {out.rc}): {out.stderr.strip()[:200]}"}
        return parse(out.stdout if out.stdout.strip() else out.stderr)

    return command(argv, read, timeout=timeout, key=f"subject{label}:" + "\0".join(argv))


def text_file(path: str, parse: Callable[[str], object]) -> Fact[object]:
    def read(state: FileState) -> object:
        return parse(state.text or "") if state.exists else {"unavailable": f"{path} does not exist"}

    fact = file_state(path)  # its own key: the host facts read some of these files, parsed otherwise
    return Fact("subject:" + fact.key, fact.request, lambda result: read(fact.parse(result)))


@dataclass(frozen=True)
class Subject:
    name: str
    summary: str
    reads: dict[str, Fact]  # label in the output -> the read


def _log_view(text: str) -> dict[str, object]:
    return {"lines": len(split_kernel_log(text)), "nouveau": find_nouveau(text),
            "api_mismatch": find_api_mismatch(text)}


SUBJECTS: dict[str, Subject] = {s.name: s for s in (
    Subject("gpus", "every GPU as nvidia-smi sees it: -q -x, -q, -L, the table, --version, one dmon sample", {
        "query_xml": tool(["nvidia-smi", "-q", "-x"], parse_nvidia_smi_query_xml),
        "query": tool(["nvidia-smi", "-q"], parse_nvidia_smi_query),
        "list": tool(["nvidia-smi", "-L"], parse_gpu_list),
        "table": tool(["nvidia-smi"], parse_nvidia_smi_table),
        "version": tool(["nvidia-smi", "--version"], parse_nvidia_smi_version),
        "dmon": tool(["nvidia-smi", "dmon", "-c", "1"], parse_dmon),
    }),
    Subject("topology", "the GPU/NIC connection matrix and CPU/NUMA affinity (nvidia-smi topo -m)", {
        "matrix": tool(["nvidia-smi", "topo", "-m"], parse_topology),
    }),
    Subject("nvlink", "NVLink links and, on NVLink5, their firmware (nvidia-smi nvlink -s, -info)", {
        "status": tool(["nvidia-smi", "nvlink", "-s"], parse_nvlink_status),
        "info": tool(["nvidia-smi", "nvlink", "-info"], parse_nvlink_info),
        "fabric": tool(["nvidia-smi", "-q"], parse_query_excerpt, label="-fabric"),  # the first GPU's Fabric block
    }),
    Subject("driver", "the kernel module loaded and on disk, its parameters, the device majors", {
        "loaded": text_file("/proc/driver/nvidia/version", parse_proc_driver_version),
        "params": text_file("/proc/driver/nvidia/params", parse_proc_driver_params),
        "modinfo": tool(["modinfo", "nvidia"], parse_modinfo),
        "module_version": tool(["modinfo", "-F", "version", "nvidia"], parse_modinfo_version),
        "devices": text_file("/proc/devices", parse_proc_devices),
    }),
    Subject("packages", "NVIDIA and CUDA packages: dpkg -l, held ones, the driver's apt policy; rpm and dnf", {
        "dpkg": tool(["dpkg", "-l", "*nvidia*", "*cuda*"], parse_dpkg_l),
        "held": tool(["apt-mark", "showhold"], parse_apt_mark_showhold),
        "policy": tool(["apt-cache", "policy", "nvidia-driver", "cuda-drivers", "nvidia-open"], parse_apt_cache_policy),
        "rpm": tool(["rpm", "-qa"], parse_rpm_qa),
        "dnf_modules": tool(["dnf", "module", "list", "nvidia-driver"], parse_dnf_module_list, timeout=60),
    }),
    Subject("services", "failed units, and the NVIDIA units' state and whether they start at boot", {
        "failed": tool(["systemctl", "list-units", "--failed", "--no-pager"], parse_list_units),
        "units": tool(["systemctl", "show", *NVIDIA_UNITS, "--no-pager",
                       "--property=Id,LoadState,ActiveState,SubState,UnitFileState"], parse_systemctl_show_all),
        "enabled": tool(["systemctl", "is-enabled", "nvidia-persistenced"], parse_is_enabled),
    }),
    Subject("infiniband", "HCAs and ports: sysfs, ibstat, ibstatus, ibv_devinfo, link flaps this boot", {
        "sysfs": file_glob([f"/sys/class/infiniband/*/{name}" for name in ("fw_ver", "board_id", "hca_type")]
                           + [f"/sys/class/infiniband/*/ports/*/{name}"
                              for name in ("state", "phys_state", "rate", "link_layer")],
                           parse_sysfs_infiniband_files, key="subject:ib-sysfs"),
        "ibstat": tool(["ibstat"], parse_ibstat),
        "ibstatus": tool(["ibstatus"], parse_ibstatus),
        "devices": tool(["ibv_devinfo", "-l"], parse_ibv_devinfo_list),
        "devinfo": tool(["ibv_devinfo", "-v"], parse_ibv_devinfo),
        "carrier": tool(["journalctl", "-b", "0", "--no-pager", "-q", "-g", "carrier"], parse_carrier_events),
    }),
    Subject("kernel_log", "this boot's kernel log: lines, nouveau, an NVRM API mismatch", {
        "log": tool(["dmesg"], _log_view),
    }),
    Subject("fabricmanager", "the fabric manager's log: its state, version mismatch, NVL5 and nvlsm lines", {
        "log": text_file("/var/log/fabricmanager.log", parse_fabric_manager_log),
        "journal": tool(["journalctl", "-u", "nvidia-fabricmanager", "-b", "0", "--no-pager", "-q"],
                        parse_fabric_manager_log),   # the same state machine reads the journal
        "journal_mismatch": tool(["journalctl", "-u", "nvidia-fabricmanager", "-b", "0", "--no-pager", "-q"],
                                 find_version_mismatch, label="-mismatch"),
    }),
    Subject("imex", "the IMEX domain (nvidia-imex-ctl -N) and the daemon's log", {
        "domain": tool(["nvidia-imex-ctl", "-N"], parse_imex_ctl_nodes),
        "log": text_file("/var/log/nvidia-imex.log", parse_imex_log),
    }),
    Subject("firmware", "firmware in band: each GPU's VBIOS, InfoROM and GSP (nvidia-smi -q), each HCA's (sysfs "
            "fw_ver, ibstat), the BIOS (dmidecode -t bios); with bmc_address, the BMC's inventory and BIOS "
            "attributes over Redfish", {
        "gpus": tool(["nvidia-smi", "-q"], lambda text: gpu_firmware(parse_nvidia_smi_query(text)), label="-firmware"),
        "hcas": file_glob(["/sys/class/infiniband/*/fw_ver"],
                          lambda files: hca_firmware(None, parse_sysfs_infiniband_files(files)),
                          key="subject:ib-fw_ver"),
        "hcas_ibstat": tool(["ibstat"], lambda text: hca_firmware(parse_ibstat(text)), label="-firmware"),
        "bios": tool(["dmidecode", "-t", "bios"], lambda text: bios_firmware(parse_dmidecode(text))),
    }),
    Subject("dcgm", "DCGM's health watch verdict (dcgmi health -c -j), the GPUs it sees (dcgmi discovery -l) and "
            "one sample of temperature, power, use, memory and volatile ECC (dcgmi dmon)", {
        "health": tool(["dcgmi", "health", "-c", "-j"], parse_dcgmi_health),
        "discovery": tool(["dcgmi", "discovery", "-l"], parse_dcgmi_discovery),
        "dmon": tool(["dcgmi", "dmon", "-e", DMON_FIELDS, "-c", "1"], parse_dcgmi_dmon),
    }),
    Subject("cdi", "the CDI spec's last generation: the nvidia-cdi-refresh unit's journal, nvidia-ctk's messages", {
        "refresh": tool(["journalctl", "-u", "nvidia-cdi-refresh", "-b", "0", "--no-pager", "-q"],
                        parse_cdi_generate_log),
    }),
    Subject("dcgm_diag", "on demand: DCGM's level 1 diagnostic (software checks, seconds; dcgmi diag -r 1)", {
        "diag": tool(["dcgmi", "diag", "-r", "1"], parse_dcgmi_diag_table, timeout=120),
    }),
)}


def subject_reads(names: list[str]) -> list[Fact]:
    return [fact for name in names for fact in SUBJECTS[name].reads.values()]


def subject_view(names: list[str], values: Mapping[str, object]) -> dict[str, dict[str, JSONValue]]:
    """Each subject's parsed values by label, from the parsed facts (by key)."""
    view: dict[str, dict[str, JSONValue]] = {}
    for name in names:
        parts = {}
        for label, fact in SUBJECTS[name].reads.items():
            value = values.get(fact.key)
            parts[label] = {"unavailable": str(value)} if isinstance(value, Exception) else plain(value)
        view[name] = parts
    return view
