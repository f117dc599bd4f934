"""nvidia-smi -L, --version, failures, --query-* CSV, dmon, the default table, nvlink -s
and topo -m, on every real capture of those kinds (values read from the files)."""
from __future__ import annotations

import pytest

from gpuconf.facts.common import Unparseable, incomplete
from gpuconf.facts.nvidia import (
    DRIVER_LIBRARY_MISMATCH,
    DRIVER_NOT_LOADED,
    GPU_LOST,
    NO_DEVICES,
    NvidiaSmiFailure,
    decode_clock_event_reasons,
    detect_nvidia_smi_failure,
    parse_dmon,
    parse_gpu_list,
    parse_nvidia_smi_table,
    parse_nvidia_smi_version,
    parse_nvlink_status,
    parse_query_csv,
    parse_topology,
)
from tests.real import read_real as read


def as_printed(rel: str) -> str:
    """gpud's testdata files were stored without the newline the tool printed last; a last
    line without one reads as cut short (gpuconf.facts.common.cut_line), so add it back."""
    text = read(rel)
    return text + "\n" if rel.endswith("-gpud.txt") and not text.endswith("\n") else text


D = "nvidia-smi/"

# -L: file -> (gpu count, first name, first uuid, MIG devices of GPU 0, first MIG profile)
LISTS = {
    D + "L-580.126.09-a100-sxm4-40gb.txt":
        (1, "NVIDIA A100-SXM4-40GB", "GPU-5428af19-1e82-a38c-ee42-cdd3ad745b7e", 0, None),
    D + "L-8x-h100-mig-7x1g.10gb-nvidia-gpu-exporter.txt":
        (8, "NVIDIA H100 80GB HBM3", "GPU-63d1e50a-b952-d15c-0740-12bc14859142", 7, "1g.10gb"),
    D + "L-mig-nvidia-h100-mig-590.48.01-nvidia-gpu-exporter.txt":
        (1, "NVIDIA H100 80GB HBM3", "GPU-00000000-0000-0000-0000-000000000000", 4, "3g.40gb"),
    D + "L-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt":
        (1, "NVIDIA H200", "GPU-00000000-0000-0000-0000-000000000000", 0, None),
    D + "L-nvidia-l40s-595.80-nvidia-gpu-exporter.txt":
        (1, "NVIDIA L40S", "GPU-00000000-0000-0000-0000-000000000000", 0, None),
}


@pytest.mark.parametrize("rel", sorted(LISTS))
def test_gpu_list(rel: str) -> None:
    count, name, uuid, migs, profile = LISTS[rel]
    listing = parse_gpu_list(read(rel))
    assert (listing.failure, listing.problems) == (None, ())
    assert len(listing.gpus) == count
    first = listing.gpus[0]
    assert (first.index, first.name, first.uuid) == (0, name, uuid)
    assert len(first.mig_devices) == migs
    if profile:
        assert first.mig_devices[0].profile == profile
        assert first.mig_devices[0].uuid.startswith("MIG-")


def test_gpu_list_mig_details() -> None:
    listing = parse_gpu_list(read(D + "L-8x-h100-mig-7x1g.10gb-nvidia-gpu-exporter.txt"))
    assert [g.index for g in listing.gpus] == list(range(8))
    assert all(len(g.mig_devices) == 7 for g in listing.gpus)
    assert listing.gpus[1].mig_devices[6].uuid == "MIG-15f2fb26-60f2-57cd-a670-205da2ccddf5"
    mixed = parse_gpu_list(read(D + "L-mig-nvidia-h100-mig-590.48.01-nvidia-gpu-exporter.txt"))
    assert [m.profile for m in mixed.gpus[0].mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]


VERSIONS = {
    D + "version-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt": ("590.48.01", "590.48", "590.48.01", "13.1"),
    D + "version-nvidia-l40s-595.80-nvidia-gpu-exporter.txt": ("595.80", "595.80", "595.80", "13.2"),
}


@pytest.mark.parametrize("rel", sorted(VERSIONS))
def test_version(rel: str) -> None:
    version = parse_nvidia_smi_version(read(rel))
    assert not isinstance(version, (Unparseable, NvidiaSmiFailure))
    assert (version.nvidia_smi, version.nvml, version.driver, version.cuda) == VERSIONS[rel]


FAILURES = {
    D + "failure-couldnt-communicate-after-unattended-upgrade-shine-cluster-50.txt": (DRIVER_NOT_LOADED, None),
    D + "failure-couldnt-communicate-single-line-gcp-compute-gpu-installation-18.txt": (DRIVER_NOT_LOADED, None),
    D + "failure-nvml-driver-library-version-mismatch-580-truenas-19.txt": (DRIVER_LIBRARY_MISMATCH, "580.178"),
    D + "failure-two-line-curly-apostrophe-copy-qixuema-envs-4.txt": (DRIVER_NOT_LOADED, None),
}


@pytest.mark.parametrize("rel", sorted(FAILURES))
def test_failure_kinds(rel: str) -> None:
    kind, library = FAILURES[rel]
    text = read(rel)
    failure = detect_nvidia_smi_failure(text)
    assert failure is not None
    assert (failure.kind, failure.nvml_library_version) == (kind, library)
    # every nvidia-smi parser reports it instead of an empty success
    assert parse_gpu_list(text).failure == failure
    assert parse_nvidia_smi_table(text).failure == failure
    assert parse_nvidia_smi_version(text) == failure


def test_failure_other_kinds_and_non_failures() -> None:
    assert detect_nvidia_smi_failure("No devices were found\n").kind == NO_DEVICES  # type: ignore[union-attr]
    lost = detect_nvidia_smi_failure(
        "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  "
        "Reboot the system to recover this GPU\n")
    assert lost is not None and (lost.kind, lost.bus_id) == (GPU_LOST, "0000:3B:00.0")
    # a lost GPU is a partial failure: the other GPUs are still listed, with the failure attached
    partial = parse_gpu_list("Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\n"
                             "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\nGPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-c)\n")
    assert [g.index for g in partial.gpus] == [0, 2]
    assert partial.failure is not None and (partial.failure.kind, partial.failure.bus_id) == (GPU_LOST, "0000:3B:00.0")
    rows = parse_query_csv("Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.\n"
                           "0, 61.25\n2, 60.10\n", fields=["index", "power.draw"])
    assert [r["index"] for r in rows.rows] == [0, 2] and rows.failure is not None
    assert detect_nvidia_smi_failure(read(D + "L-580.126.09-a100-sxm4-40gb.txt")) is None
    assert detect_nvidia_smi_failure("") is None


# --query-*: file -> (row count, field count, {field: first-row value})
CSVS = {
    D + "query-compute-apps-csv-load-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt":
        (3, 8, {"pid": 10291, "process_name": "/root/tools/memhog", "used_gpu_memory": 2566,
                "gpu_bus_id": "00000000:83:00.0", "gpu_serial": "0000000000000"}),
    D + "query-gpu-csv-idle-nvidia-geforce-rtx-4080-super-595.71.05-nvidia-gpu-exporter.txt":
        (1, 202, {"driver_version": "595.71.05", "name": "NVIDIA GeForce RTX 4080 SUPER",
                  "serial": None, "pcie.link.gen.max": 4, "temperature.gpu": 43,
                  "power.draw": 26.2, "memory.total": 16376, "persistence_mode": "Disabled",
                  "display_mode": None, "compute_cap": "8.9", "pci.bus": "0x01",
                  "clocks_event_reasons.active": "0x0000000000000001"}),
    D + "query-gpu-csv-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt":
        (1, 212, {"driver_version": "590.48.01", "name": "NVIDIA H200", "power.draw": 77.71,
                  "power.min_limit": 200.0, "memory.total": 143771, "fabric.state": "Completed",
                  "ecc.errors.uncorrected.volatile.total": 0, "remapped_rows.pending": "No",
                  "fabric.clusterUuid": "00000000-0000-0000-0000-000000000000"}),
    D + "query-gpu-csv-idle-nvidia-l40s-595.80-nvidia-gpu-exporter.txt":
        (1, 202, {"driver_version": "595.80", "temperature.gpu": 63, "power.draw": 144.97,
                  "utilization.gpu": 100, "fabric.state": None,
                  "clocks_event_reasons.active": "0x0000000000000000"}),
    D + "query-gpu-csv-index-name-driver-pstate-pcie-temp-util-mem-h100-595.71.05.txt":
        (1, 11, {"index": 0, "name": "NVIDIA H100 80GB HBM3", "driver_version": "595.71.05",
                 "pstate": "P0", "pcie.link.gen.current": 5, "temperature.gpu": 29,
                 "memory.total": 81559, "memory.free": 81081, "memory.used": 0}),
    D + "query-gpu-csv-loop-timestamp-util-2024.txt":
        (8, 3, {"timestamp": "2024/09/08 13:03:31.000", "utilization.gpu": 100, "utilization.memory": 26}),
    D + "query-gpu-csv-mig-idle-nvidia-h100-mig-590.48.01-nvidia-gpu-exporter.txt":
        (1, 212, {"name": "NVIDIA H100 80GB HBM3", "mig.mode.current": "Enabled",
                  "utilization.gpu": None, "pci.bus_id": "00000000:00:09.0"}),
    D + "query-gpu-csv-timestamp-name-temp-util-mem-rtx3070.txt":
        (1, 8, {"name": "NVIDIA GeForce RTX 3070", "temperature.gpu": 50, "utilization.gpu": 1,
                "memory.total": 8192, "memory.free": 6759, "memory.used": 1081}),
    D + "query-retired-pages-csv-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt":
        (2, 8, {"gpu_name": "NVIDIA H200", "retired_pages.address": None,
                "retired_pages.cause": "Single Bit ECC"}),
}


@pytest.mark.parametrize("rel", sorted(CSVS))
def test_query_csv(rel: str) -> None:
    rows, fields, expected = CSVS[rel]
    table = parse_query_csv(read(rel))
    assert (table.failure, table.problems) == (None, ())
    assert (len(table.rows), len(table.fields)) == (rows, fields)
    assert {key: table.rows[0][key] for key in expected} == expected


def test_query_csv_units_noheader_and_mask_decoding() -> None:
    table = parse_query_csv(read(D + "query-gpu-csv-loop-timestamp-util-2024.txt"))
    assert table.units == {"utilization.gpu": "%", "utilization.memory": "%"}
    assert table.column("utilization.memory")[-1] == 17
    noheader = parse_query_csv("0, 535.104.05, 61.25, [N/A]\n1, 535.104.05, 60.10, Enabled\n",
                               fields=["index", "driver_version", "power.draw", "persistence_mode"])
    assert noheader.rows[1] == {"index": 1, "driver_version": "535.104.05", "power.draw": 60.1,
                                "persistence_mode": "Enabled"}
    assert noheader.rows[0]["persistence_mode"] is None
    reasons = decode_clock_event_reasons("0x0000000000000048")
    assert reasons is not None and reasons.active == ("hw_slowdown", "hw_thermal_slowdown")
    bad = parse_query_csv("a, b\n1\n")
    assert bad.rows == () and len(bad.problems) == 1


def test_dmon() -> None:
    samples = parse_dmon(read(D + "dmon-c5-nvidia-geforce-rtx-4080-super-595.71.05-nvidia-gpu-exporter.txt"))
    assert samples.columns[:4] == ("gpu", "pwr", "gtemp", "mtemp")
    assert samples.units[:3] == ("Idx", "W", "C")
    assert len(samples.rows) == 5
    assert samples.rows[0] == {"gpu": 0, "pwr": 27, "gtemp": 43, "mtemp": None, "sm": 0, "mem": 16,
                               "enc": 0, "dec": 0, "jpg": 0, "ofa": 0, "mclk": 405, "pclk": 210}
    assert [row["mem"] for row in samples.rows] == [16, 25, 26, 32, 32]


# default table: file -> (driver, cuda, gpus, processes, complete, first name, first bus,
#                         temp C, power draw W, power cap W, memory total MiB)
TABLES = {
    D + "default-470.256.02-gtx680-thamada-gls.txt":
        ("470.256.02", "11.4", 1, 0, True, "NVIDIA GeForce", "00000000:08:00.0", 35, None, None, 2000),
    D + "default-510.47.03-geforce-rocky8-TRUNCATED-gpu-operator-356.txt":
        ("510.47.03", "11.6", 1, 0, False, "NVIDIA GeForce", "00000000:05:00.0", 51, 15.0, None, 4096),
    D + "default-515.65.01-a100-sxm-40gb-old-layout-TRUNCATED-miniWeather-12.txt":
        ("515.65.01", "11.7", 1, 0, False, "NVIDIA A100-SXM", "00000000:03:00.0", 28, 52.0, 400.0, 40960),
    D + "default-525.125.06-geforce-err-fan-truncated-gpud.txt":
        ("525.125.06", "12.0", 1, 0, False, "NVIDIA GeForce", "00000000:01:00.0", 38, 49.0, 450.0, 23028),
    D + "default-535.161.07-gtx1050ti-thamada-gls.txt":
        ("535.161.07", "12.2", 1, 0, True, "NVIDIA GeForce GTX 1050 Ti", "00000000:08:00.0", 31, None, 75.0, 4096),
    D + "default-550.127.05-a10-gpud-e2e.txt":
        ("550.127.05", "12.4", 1, 0, True, "NVIDIA A10", "00000000:06:00.0", 32, 21.0, 150.0, 23028),
    D + "default-550.127.05-a40x10-thamada-gls.txt":
        ("550.127.05", "12.4", 10, 0, True, "NVIDIA A40", "00000000:4F:00.0", 29, 23.0, 300.0, 46068),
    D + "default-550.127.05-gh200-thamada-gls.txt":
        ("550.127.05", "12.4", 1, 0, True, "NVIDIA GH200 480GB", "00000000:DD:00.0", 31, 87.0, 700.0, 97871),
    D + "default-550.127.05-l40s-thamada-gls.txt":
        ("550.127.05", "12.4", 1, 0, True, "NVIDIA L40S", "00000000:A1:00.0", 31, 33.0, 350.0, 46068),
    D + "default-550.127.05-v100_x8-thamada-gls.txt":
        ("550.127.05", "12.4", 8, 0, True, "Tesla V100-SXM2-16GB", "00000000:00:04.0", 37, 45.0, 300.0, 16384),
    D + "default-550.54.14-h100nvlx2-thamada-gls.txt":
        ("550.54.14", "12.4", 2, 0, True, "NVIDIA H100 NVL", "00000000:AD:00.0", 32, 61.0, 310.0, 95830),
    D + "default-550.90.07-8x-h100-80gb-hbm3-gpud.txt":
        ("550.90.07", "12.4", 8, 0, True, "NVIDIA H100 80GB HBM3", "00000000:19:00.0", 27, 72.0, 700.0, 81559),
    D + "default-550.90.07-l4-thamada-gls.txt":
        ("550.90.07", "12.4", 1, 0, True, "NVIDIA L4", "00000000:01:00.0", 33, 16.0, 72.0, 23034),
    D + "default-550.90.12-a10-thamada-gls.txt":
        ("550.90.12", "12.4", 1, 0, True, "NVIDIA A10", "00000000:08:00.0", 33, 15.0, 150.0, 23028),
    D + "default-550.90.12-h200-thamada-gls.txt":
        ("550.90.12", "12.4", 1, 0, True, "NVIDIA H200", "00000000:03:00.0", 28, 74.0, 700.0, 143771),
    D + "default-565.57.01-h100sxmx8-thamada-gls.txt":
        ("565.57.01", "12.7", 8, 0, True, "NVIDIA H100 80GB HBM3", "00000000:18:00.0", 30, 100.0, 700.0, 81559),
    D + "default-570.124.06-rtx5090-thamada-gls.txt":
        ("570.124.06", "12.8", 1, 0, True, "NVIDIA GeForce RTX 5090", "00000000:02:00.0", 25, 24.0, 575.0, 32607),
    D + "default-580.126.09-a100-sxm4-40gb-gcp.txt":
        ("580.126.09", "13.0", 1, 0, True, "NVIDIA A100-SXM4-40GB", "00000000:00:04.0", 29, 45.0, 400.0, 40960),
    D + "default-idle-nvidia-geforce-rtx-4080-super-595.71.05-nvidia-gpu-exporter.txt":
        ("595.71.05", "13.2", 1, 5, True, "NVIDIA GeForce RTX 4080", "00000000:01:00.0", 43, 25.0, 320.0, 16376),
    D + "default-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt":
        ("590.48.01", "13.1", 1, 0, True, "NVIDIA H200", "00000000:83:00.0", 28, 77.0, 700.0, 143771),
    D + "default-idle-nvidia-l40s-595.80-nvidia-gpu-exporter.txt":
        ("595.80", "13.2", 1, 0, True, "NVIDIA L40S", "00000000:01:00.0", 64, 242.0, 350.0, 46068),
    D + "default-load-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt":
        ("590.48.01", "13.1", 1, 3, True, "NVIDIA H200", "00000000:83:00.0", 52, 628.0, 700.0, 143771),
    D + "default-mig-idle-nvidia-h100-mig-590.48.01-nvidia-gpu-exporter.txt":
        ("590.48.01", "13.1", 1, 0, True, "NVIDIA H100 80GB HBM3", "00000000:00:09.0", 42, 98.0, 700.0, 81559),
}


@pytest.mark.parametrize("rel", sorted(TABLES))
def test_default_table(rel: str) -> None:
    driver, cuda, gpus, procs, complete, name, bus, temp, draw, cap, total = TABLES[rel]
    table = parse_nvidia_smi_table(as_printed(rel))
    assert table.failure is None
    assert (table.driver_version, table.cuda_version) == (driver, cuda)
    assert (len(table.gpus), len(table.processes), table.complete) == (gpus, procs, complete)
    first = table.gpus[0]
    assert (first.index, first.name, first.bus_id) == (0, name, bus)
    assert (first.temperature_c, first.power_draw_w, first.power_cap_w, first.memory_total_mib) == (
        temp, draw, cap, total)


def test_default_table_details() -> None:
    err = parse_nvidia_smi_table(read(D + "default-525.125.06-geforce-err-fan-truncated-gpud.txt"))
    gpu = err.gpus[0]
    assert (gpu.fan_percent, gpu.compute_mode, gpu.name_truncated) == (None, "E. Process", True)
    assert err.problems == ("no Processes block: output cut short",)
    load = parse_nvidia_smi_table(read(D + "default-load-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt"))
    assert [(p.pid, p.type, p.name, p.used_memory_mib) for p in load.processes] == [
        (10291, "C", "/root/tools/memhog", 2566), (10293, "C", "/root/tools/memhog", 1542),
        (10309, "C", "./gpu_burn", 28234)]
    assert (load.gpus[0].utilization_percent, load.gpus[0].memory_used_mib) == (100, 32362)
    desktop = parse_nvidia_smi_table(read(D + "default-idle-nvidia-geforce-rtx-4080-super-595.71.05-nvidia-gpu-exporter.txt"))
    assert desktop.processes[0].type == "C+G" and desktop.gpus[0].display_active == "On"
    mig = parse_nvidia_smi_table(read(D + "default-mig-idle-nvidia-h100-mig-590.48.01-nvidia-gpu-exporter.txt"))
    assert mig.gpus[0].mig_mode == "Enabled" and mig.gpus[0].utilization_percent is None
    assert [(m.gpu_instance_id, m.memory_total_mib, m.multiprocessor_count) for m in mig.mig_devices] == [
        (2, 40448, 60), (3, 20096, 32), (9, 9984, 16), (10, 9984, 16)]
    a40 = parse_nvidia_smi_table(read(D + "default-550.127.05-a40x10-thamada-gls.txt"))
    assert [g.pci_address for g in a40.gpus][-1] == "0000:d6:00.0"
    assert parse_nvidia_smi_table(read(D + "default-580.126.09-a100-sxm4-40gb-gcp.txt")).timestamp == "Sat May  9 03:38:32 2026"


# nvlink -s: file -> (gpu count, first gpu index, status, link count, first speed GB/s)
NVLINKS = {
    D + "nvlink-s-8x-a100-sxm4-80gb-gpud.txt": (8, 0, "links", 12, 25.0),
    D + "nvlink-s-a10-empty-output-gpud.txt": (0, None, None, 0, None),
    D + "nvlink-s-i-6-a100-80gb-all-links-inactive-azure-nhc.txt": (1, 6, "all_inactive", 0, None),
    D + "nvlink-s-i-7-a100-80gb-all-links-25GBs-azure-nhc.txt": (1, 7, "links", 12, 25.0),
    D + "nvlink-s-mig-unsupported-nvidia-h100-mig-590.48.01-nvidia-gpu-exporter.txt": (1, 0, "mig_mode", 0, None),
    D + "nvlink-s-no-nvlink-nvidia-l40s-595.80-nvidia-gpu-exporter.txt": (1, 0, "no_nvlink", 0, None),
    D + "nvlink-s-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt": (1, 0, "links", 18, 26.562),
}


@pytest.mark.parametrize("rel", sorted(NVLINKS))
def test_nvlink_status(rel: str) -> None:
    count, index, status, links, speed = NVLINKS[rel]
    result = parse_nvlink_status(read(rel))
    assert (result.failure, result.problems) == (None, ())
    assert len(result.gpus) == count
    if count:
        gpu = result.gpus[0]
        assert (gpu.index, gpu.status, len(gpu.links)) == (index, status, links)
        assert (gpu.links[0].speed_gbps if gpu.links else None) == speed
        assert gpu.inactive_links == ()


def test_nvlink_inactive_links_and_all_gpus() -> None:
    a100 = parse_nvlink_status(as_printed(D + "nvlink-s-8x-a100-sxm4-80gb-gpud.txt"))
    assert [g.active_link_count for g in a100.gpus] == [12] * 8
    assert a100.gpus[7].uuid is not None and a100.gpus[7].uuid.startswith("GPU-")
    degraded = parse_nvlink_status("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n")
    assert degraded.gpus[0].inactive_links == (1,) and degraded.gpus[0].active_link_count == 1


# topo -m: file -> (device columns, GPU rows with affinity, (GPU0, GPU1) link, GPU0 CPU affinity, whole).
# The format closes itself (a row per device the header names, the Legend, a NIC Legend naming
# each NIC): three captures stop before that end (two cut by the index, one whose reporter left
# the Legend out), so their values are read and the result says it is incomplete.
TOPOS = {
    D + "topo-m-16x-v100-dgx2-NV6-mlx5-columns-old-layout-TRUNCATED-nccl-tests-78.txt": (26, 4, "NV6", "0-23,48-71", False),
    D + "topo-m-8x-hopper-NV18-9nic-spaces-TRUNCATED-sglang-13973.txt": (17, 6, "NV18", "0-23,96-119", False),
    D + "topo-m-8x-rtx4090-2nic-tabs-go-gpuallocator-17.txt": (10, 8, "SYS", "0-55,112-167", False),
    D + "topo-m-ansi-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt": (1, 1, None, "0-23", True),
    D + "topo-m-ansi-nvidia-l40s-595.80-nvidia-gpu-exporter.txt": (1, 1, None, "0-7", True),
}


@pytest.mark.parametrize("rel", sorted(TOPOS))
def test_topology(rel: str) -> None:
    devices, rows, link, cpus, whole = TOPOS[rel]
    topo = parse_topology(read(rel))
    assert topo.failure is None
    assert (len(topo.devices), len(topo.affinity)) == (devices, rows)
    assert topo.links.get(("GPU0", "GPU1")) == link
    assert topo.links[("GPU0", "GPU0")] == "X"
    assert topo.affinity["GPU0"].cpu_affinity == cpus
    assert (incomplete(topo) == "") == whole, incomplete(topo)


def test_topology_details() -> None:
    hopper = parse_topology(read(D + "topo-m-8x-hopper-NV18-9nic-spaces-TRUNCATED-sglang-13973.txt"))
    assert hopper.nvlink_count("GPU0", "GPU7") == 18
    assert hopper.links[("GPU3", "NIC4")] == "PIX"
    assert hopper.affinity["GPU4"].numa_affinity == "2"
    assert "GPU6, GPU7, NIC0, NIC1 and 7 more without a row" in hopper.incomplete
    tabs = parse_topology(read(D + "topo-m-8x-rtx4090-2nic-tabs-go-gpuallocator-17.txt"))
    assert tabs.links[("NIC0", "NIC1")] == "PIX" and tabs.links[("GPU6", "NIC0")] == "PHB"
    assert "NIC0" not in tabs.affinity
    assert tabs.incomplete == "nvidia-smi topo -m ends before its Legend: cut short"
    ansi = parse_topology(read(D + "topo-m-ansi-nvidia-l40s-595.80-nvidia-gpu-exporter.txt"))
    assert ansi.devices == ("GPU0",) and ansi.affinity["GPU0"].gpu_numa_id == "N/A"


# SYNTHETIC (documented shape, not a capture): a GPU and a NIC, the Legend as the 590 capture
# above prints it, and the NIC Legend as published topo -m outputs with NICs print it.
LEGEND = "\n".join(line for line in read(D + "topo-m-ansi-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt").splitlines()
                   if line.startswith("  ") or line.startswith("Legend") or not line)
WITH_NIC = ("\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tPIX\t0-31\t0\t\tN/A\nNIC0\tPIX\t X \n" + LEGEND + "\n\nNIC Legend:\n\n  NIC0: mlx5_0\n")


def test_topology_nic_legend_and_each_closing_line():
    whole = parse_topology(WITH_NIC)
    assert whole.nic_names == {"NIC0": "mlx5_0"} and whole.links[("NIC0", "GPU0")] == "PIX"
    assert whole.incomplete == ""
    lines = WITH_NIC.splitlines(keepends=True)
    closing = [n for n, line in enumerate(lines) if line.startswith(("NIC0\t", "Legend", "  NV#", "  NIC0:"))]
    for n in closing:   # cut at the line end just before each closing line: never whole
        assert incomplete(parse_topology("".join(lines[:n]))), lines[n]


CASES = sorted(LISTS) + sorted(VERSIONS) + sorted(FAILURES) + sorted(CSVS) + sorted(TABLES) + \
    sorted(NVLINKS) + sorted(TOPOS) + [D + "dmon-c5-nvidia-geforce-rtx-4080-super-595.71.05-nvidia-gpu-exporter.txt"]
