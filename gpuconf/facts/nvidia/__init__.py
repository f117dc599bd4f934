"""NVIDIA facts: pure parsers for nvidia-smi, the loaded/installed driver, nvcc and
fabric manager output. Import from here; the submodules are an implementation detail.

==============================================  ======================================
command                                         parser
==============================================  ======================================
``nvidia-smi -L``                               :func:`parse_gpu_list`
``nvidia-smi -q`` / ``-q -d SECTIONS``          :func:`parse_nvidia_smi_query`
``nvidia-smi -q -x``                            :func:`parse_nvidia_smi_query_xml`
``nvidia-smi --query-*=... --format=csv``       :func:`parse_query_csv`
``nvidia-smi dmon``                             :func:`parse_dmon`
``nvidia-smi`` (the default table)              :func:`parse_nvidia_smi_table`
``nvidia-smi nvlink -s``                        :func:`parse_nvlink_status`
``nvidia-smi topo -m``                          :func:`parse_topology`
``nvidia-smi --version``                        :func:`parse_nvidia_smi_version`
``nvidia-smi -r`` (``--gpu-reset``)             :func:`parse_gpu_reset`
any nvidia-smi output                           :func:`detect_nvidia_smi_failure`
``cat /proc/driver/nvidia/version``             :func:`parse_proc_driver_version`
``modinfo nvidia`` / ``modinfo -F version``     :func:`parse_modinfo` / :func:`parse_modinfo_version`
``nvcc --version``                              :func:`parse_nvcc_version`
fabric manager log / journal                    :func:`parse_fabric_manager_log`, :func:`find_version_mismatch`
==============================================  ======================================

The submodules load when a name of theirs is first used (PEP 562): a check imports the parsers
its playbook's tasks use, not the ``-q`` XML reader or the table parser it never runs.
"""
# ruff: noqa: F401 - the imports below are for type checkers; at run time __getattr__ loads them
from __future__ import annotations

from typing import TYPE_CHECKING

from gpuconf.facts.common import lazy_exports

if TYPE_CHECKING:
    from gpuconf.facts.nvidia.clocks import CLOCK_EVENT_REASON_BITS, ClockEventReasons, decode_clock_event_reasons
    from gpuconf.facts.nvidia.csv import DmonSamples, QueryCsv, csv_value, parse_dmon, parse_query_csv
    from gpuconf.facts.nvidia.driver import (
        OPEN,
        PROPRIETARY,
        LoadedDriver,
        ModuleInfo,
        NvccVersion,
        parse_modinfo,
        parse_modinfo_version,
        parse_nvcc_version,
        parse_proc_driver_version,
    )
    from gpuconf.facts.nvidia.fabric import Fabric
    from gpuconf.facts.nvidia.fabricmanager import (
        FabricManagerLog,
        FabricManagerVersionMismatch,
        NvswitchError,
        find_version_mismatch,
        parse_fabric_manager_log,
    )
    from gpuconf.facts.nvidia.failure import (
        DRIVER_LIBRARY_MISMATCH,
        DRIVER_NOT_LOADED,
        FAILURE_KINDS,
        GPU_LOST,
        INSUFFICIENT_PERMISSIONS,
        NO_DEVICES,
        NVML_INIT_FAILED,
        NvidiaSmiFailure,
        detect_nvidia_smi_failure,
    )
    from gpuconf.facts.nvidia.listing import (
        GpuList,
        ListedGpu,
        ListedMigDevice,
        NvidiaSmiVersion,
        parse_gpu_list,
        parse_nvidia_smi_version,
    )
    from gpuconf.facts.nvidia.nvlink import GpuNvlinks, NvlinkLink, NvlinkStatus, parse_nvlink_status
    from gpuconf.facts.nvidia.query import parse_nvidia_smi_query, parse_nvidia_smi_query_xml
    from gpuconf.facts.nvidia.query_model import (
        Clocks,
        EccErrors,
        GpuDetails,
        GpuProcess,
        MemoryUsage,
        MigDevice,
        NvidiaSmiQuery,
        PcieLink,
        PowerReadings,
        RemappedRows,
        RetiredPages,
        Temperatures,
        Utilization,
    )
    from gpuconf.facts.nvidia.reset import GpuResetReport, parse_gpu_reset
    from gpuconf.facts.nvidia.table import (
        NvidiaSmiTable,
        TableGpu,
        TableMigDevice,
        TableProcess,
        parse_nvidia_smi_table,
    )
    from gpuconf.facts.nvidia.topology import GpuAffinity, Topology, parse_topology

# where each public name lives: its submodule, imported on first use
_SUBMODULES = {
    "clocks": ("CLOCK_EVENT_REASON_BITS", "ClockEventReasons", "decode_clock_event_reasons"),
    "csv": ("DmonSamples", "QueryCsv", "csv_value", "parse_dmon", "parse_query_csv"),
    "driver": ("OPEN", "PROPRIETARY", "LoadedDriver", "ModuleInfo", "NvccVersion", "parse_modinfo",
        "parse_modinfo_version", "parse_nvcc_version", "parse_proc_driver_version"),
    "fabric": ("Fabric",),
    "fabricmanager": ("FabricManagerLog", "FabricManagerVersionMismatch", "NvswitchError", "find_version_mismatch",
        "parse_fabric_manager_log"),
    "failure": ("DRIVER_LIBRARY_MISMATCH", "DRIVER_NOT_LOADED", "FAILURE_KINDS", "GPU_LOST",
        "INSUFFICIENT_PERMISSIONS", "NO_DEVICES", "NVML_INIT_FAILED", "NvidiaSmiFailure",
        "detect_nvidia_smi_failure"),
    "listing": ("GpuList", "ListedGpu", "ListedMigDevice", "NvidiaSmiVersion", "parse_gpu_list",
        "parse_nvidia_smi_version"),
    "nvlink": ("GpuNvlinks", "NvlinkLink", "NvlinkStatus", "parse_nvlink_status"),
    "query": ("parse_nvidia_smi_query", "parse_nvidia_smi_query_xml"),
    "query_model": ("Clocks", "EccErrors", "GpuDetails", "GpuProcess", "MemoryUsage", "MigDevice", "NvidiaSmiQuery",
        "PcieLink", "PowerReadings", "RemappedRows", "RetiredPages", "Temperatures", "Utilization"),
    "reset": ("GpuResetReport", "parse_gpu_reset"),
    "table": ("NvidiaSmiTable", "TableGpu", "TableMigDevice", "TableProcess", "parse_nvidia_smi_table"),
    "topology": ("GpuAffinity", "Topology", "parse_topology"),
}
_WHERE = {name: f"{__name__}.{module}" for module, names in _SUBMODULES.items() for name in names}
__all__ = sorted(_WHERE)  # mypy reads the TYPE_CHECKING imports above (pyproject.toml: implicit_reexport)
__getattr__ = lazy_exports(globals(), _WHERE)
