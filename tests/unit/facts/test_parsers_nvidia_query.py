"""nvidia-smi -q (text) and -q -x (XML) parsers, on every real capture of those kinds.

Each fixture has expectations read from the file by hand: counts, versions, the first
GPU's identity and readings, plus the oddity the capture was kept for.
"""
from __future__ import annotations

import pytest

from gpuconf.facts.common import Incomplete, Unparseable, incomplete
from gpuconf.facts.nvidia import (
    DRIVER_NOT_LOADED,
    NvidiaSmiQuery,
    parse_nvidia_smi_query,
    parse_nvidia_smi_query_xml,
)
from tests.real import read_real as read


def parse(rel: str) -> NvidiaSmiQuery:
    text = read(rel)
    result = parse_nvidia_smi_query_xml(text) if rel.startswith("nvidia-smi-xml/") else parse_nvidia_smi_query(text)
    assert not isinstance(result, Unparseable)
    return result


# file -> (driver, cuda, attached, gpu blocks, complete, first product, first bus id,
#          first uuid, persistence, temp C, power draw W, limit W, min W, max W)
Q = {
    "nvidia-smi/q-535.129.03-a10-1gpu-gpud.txt":
        ("535.129.03", "12.2", 1, 1, True, "NVIDIA A10", "00000000:07:00.0",
         "GPU-73d12ef7-f589-f867-4259-c7090ab44736", True, 33, 43.89, 150.0, 100.0, 150.0),
    "nvidia-smi/q-535.154.05-8x-rtx4090-addressing-mode-unknown-error-gpud.txt":
        ("535.154.05", "12.2", 8, 8, True, "NVIDIA GeForce RTX 4090", "00000000:01:00.0",
         "GPU-6b7298f4-721f-9e24-a277-9ec909ba76f0", True, 27, 46.62, 450.0, 150.0, 450.0),
    "nvidia-smi/q-535.154.05-8x-rtx4090-gpud.txt":
        ("535.154.05", "12.2", 8, 8, True, "NVIDIA GeForce RTX 4090", "00000000:01:00.0",
         "GPU-313bbff0-b0a0-fd26-4820-0578bdef3a12", True, 41, 67.76, 450.0, 150.0, 450.0),
    "nvidia-smi/q-535.154.05-8x-rtx4090-leading-blank-line-gpud.txt":
        ("535.154.05", "12.2", 8, 8, True, "NVIDIA GeForce RTX 4090", "00000000:01:00.0",
         "GPU-370465f5-30e0-6877-b85c-16729f41b90f", True, 30, 18.90, 450.0, 150.0, 450.0),
    "nvidia-smi/q-535.161.08-8x-h100-80gb-hbm3-gpud.txt":
        ("535.161.08", "12.2", 8, 8, True, "NVIDIA H100 80GB HBM3", "00000000:19:00.0",
         "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa", True, 29, 67.74, 700.0, 200.0, 700.0),
    "nvidia-smi/q-535.183.01-8x-h100-80gb-hbm3-gpud.txt":
        ("535.183.01", "12.2", 8, 8, True, "NVIDIA H100 80GB HBM3", "00000000:53:00.0",
         "GPU-566e6f65-c38e-b12f-4824-6944218668b9", True, 36, 71.97, 700.0, 200.0, 700.0),
    "nvidia-smi/q-535.183.01-h100-cut-short-partial-gpud.txt":
        ("535.183.01", "12.2", 8, 1, False, "NVIDIA H100 80GB HBM3", "00000000:53:00.0",
         "GPU-566e6f65-c38e-b12f-4824-6944218668b9", True, None, None, None, None, None),
    "nvidia-smi/q-550.127.05-a10-gpud-e2e.txt":
        ("550.127.05", "12.4", 1, 1, True, "NVIDIA A10", "00000000:06:00.0",
         "GPU-51ae0086-e1ac-4a20-f062-9caa44e4df6d", True, 33, 21.30, 150.0, 100.0, 150.0),
    "nvidia-smi/q-550.127.05-gh200-thamada-gls.txt":
        ("550.127.05", "12.4", 1, 1, True, "NVIDIA GH200 480GB", "00000000:DD:00.0",
         "GPU-35d58415-1094-5ad1-64d1-b797587d33a7", True, 31, 87.88, 700.0, 100.0, 900.0),
    "nvidia-smi/q-550.127.05-l40s-thamada-gls.txt":
        ("550.127.05", "12.4", 1, 1, True, "NVIDIA L40S", "00000000:A1:00.0",
         "GPU-1db6b1cf-de5e-b497-caca-1a027578d587", True, 30, 33.44, 350.0, 100.0, 350.0),
    "nvidia-smi/q-550.127.05-v100_x8-thamada-gls.txt":
        ("550.127.05", "12.4", 8, 8, True, "Tesla V100-SXM2-16GB", "00000000:00:04.0",
         "GPU-f3bbf1a0-ec50-caa0-d5ab-180afe8207e3", True, 37, 44.50, 300.0, 150.0, 300.0),
    "nvidia-smi/q-550.54.14-h100nvlx2-thamada-gls.txt":
        ("550.54.14", "12.4", 2, 2, True, "NVIDIA H100 NVL", "00000000:AD:00.0",
         "GPU-806f8ea2-6428-1096-a076-bb687fb45fb0", True, 32, 61.62, 310.0, 200.0, 400.0),
    "nvidia-smi/q-550.90.07-l4-thamada-gls.txt":
        ("550.90.07", "12.4", 1, 1, True, "NVIDIA L4", "00000000:01:00.0",
         "GPU-453f8851-d1a3-e72d-4d85-3ef04418205b", True, 33, 16.47, 72.0, 40.0, 72.0),
    "nvidia-smi/q-550.90.12-a10-thamada-gls.txt":
        ("550.90.12", "12.4", 1, 1, True, "NVIDIA A10", "00000000:08:00.0",
         "GPU-14705cc6-2e5b-ae28-e00a-0f87622e4299", True, 33, 15.65, 150.0, 100.0, 150.0),
    "nvidia-smi/q-550.90.12-h200-thamada-gls.txt":
        ("550.90.12", "12.4", 1, 1, True, "NVIDIA H200", "00000000:03:00.0",
         "GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732", True, 28, 74.58, 700.0, 200.0, 700.0),
    "nvidia-smi/q-560.35.03-titan-v-gpud.txt":
        ("560.35.03", "12.6", 1, 1, True, "NVIDIA TITAN V", "00000000:01:00.0",
         "GPU-f4c353ff-b56c-c1de-bcb9-7dad861b589a", False, 44, 29.02, 250.0, 100.0, 300.0),
    "nvidia-smi/q-565.57.01-h100sxmx8-thamada-gls.txt":
        ("565.57.01", "12.7", 8, 8, True, "NVIDIA H100 80GB HBM3", "00000000:18:00.0",
         "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1", True, 30, 100.89, 700.0, 200.0, 700.0),
    "nvidia-smi/q-570.124.06-rtx5090-thamada-gls.txt":
        ("570.124.06", "12.8", 1, 1, True, "NVIDIA GeForce RTX 5090", "00000000:02:00.0",
         "GPU-ea2294a3-4d61-1757-8aed-f91723f16ad2", True, 25, 23.78, 575.0, 400.0, 575.0),
    "nvidia-smi/q-d-MEMORY-UTILIZATION-375.66-legacy-TRUNCATED-gnome-shell-system-monitor-356.txt":
        ("375.66", None, 1, 1, True, None, "0000:01:00.0", None, None, None, None, None, None, None),
    "nvidia-smi/q-d-MEMORY-UTILIZATION-COMPUTE-head40-580.126.09-a100.txt":
        ("580.126.09", "13.0", 1, 1, True, None, "00000000:00:04.0", None, None, None, None, None, None, None),
    "nvidia-smi/q-d-PAGE_RETIREMENT-535.86.10-8gpu-azure-nhc.txt":
        ("535.86.10", "12.2", 8, 8, True, None, "00000001:00:00.0", None, None, None, None, None, None, None),
    "nvidia-smi/q-idle-nvidia-geforce-rtx-4080-super-595.71.05-nvidia-gpu-exporter.txt":
        ("595.71.05", "13.2", 1, 1, True, "NVIDIA GeForce RTX 4080 SUPER", "00000000:01:00.0",
         "GPU-00000000-0000-0000-0000-000000000000", False, 43, 27.74, 320.0, 150.0, 400.0),
    "nvidia-smi/q-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt":
        ("590.48.01", "13.1", 1, 1, True, "NVIDIA H200", "00000000:83:00.0",
         "GPU-00000000-0000-0000-0000-000000000000", True, 28, 77.88, 700.0, 200.0, 700.0),
    "nvidia-smi/q-idle-nvidia-l40s-595.80-nvidia-gpu-exporter.txt":
        ("595.80", "13.2", 1, 1, True, "NVIDIA L40S", "00000000:01:00.0",
         "GPU-00000000-0000-0000-0000-000000000000", False, 64, 119.88, 350.0, 100.0, 350.0),
    "nvidia-smi/q-load-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt":
        ("590.48.01", "13.1", 1, 1, True, "NVIDIA H200", "00000000:83:00.0",
         "GPU-00000000-0000-0000-0000-000000000000", True, 52, 625.24, 700.0, 200.0, 700.0),
    "nvidia-smi/q-mig-idle-nvidia-h100-mig-590.48.01-nvidia-gpu-exporter.txt":
        ("590.48.01", "13.1", 1, 1, True, "NVIDIA H100 80GB HBM3", "00000000:00:09.0",
         "GPU-00000000-0000-0000-0000-000000000000", True, 42, 72.63, 700.0, 200.0, 700.0),
    "nvidia-smi-xml/q-x-515.105.01-tesla-t4-telegraf.txt":
        ("515.105.01", "11.7", 1, 1, True, "Tesla T4", "00000000:00:1E.0",
         "GPU-d37e67a5-91dd-3774-a5cb-99096249601a", False, 40, 26.78, 70.0, 60.0, 70.0),
    "nvidia-smi-xml/q-x-535.54.03-a100-sxm4-80gb-telegraf.txt":
        ("535.54.03", "12.2", 4, 1, False, "NVIDIA A100-SXM4-80GB", "00000000:01:00.0",
         "GPU-513536b6-7d19-9063-b049-1e69664bb298", False, 27, 67.03, 500.0, 100.0, 500.0),
}

# The files this module checks, for the coverage test.
CASES = sorted(Q)


@pytest.mark.parametrize("rel", sorted(Q))
def test_query_fixture_identity_and_readings(rel: str) -> None:
    (driver, cuda, attached, blocks, complete, name, bus, uuid, persistence,
     temp, draw, limit, min_w, max_w) = Q[rel]
    report = parse(rel)
    assert report.failure is None
    assert (report.driver_version, report.cuda_version) == (driver, cuda)
    assert (report.attached_gpus, len(report.gpus), report.complete) == (attached, blocks, complete)
    gpu = report.gpus[0]
    assert (gpu.product_name, gpu.bus_id, gpu.uuid, gpu.persistence_mode) == (name, bus, uuid, persistence)
    assert gpu.temperature.gpu_c == temp
    assert gpu.power.draw_w == draw
    assert (gpu.power.limit_w, gpu.power.min_limit_w, gpu.power.max_limit_w) == (limit, min_w, max_w)


def test_h100_hw_slowdown_power_brake_active_on_every_gpu() -> None:
    report = parse("nvidia-smi/q-535.161.08-8x-h100-80gb-hbm3-gpud.txt")
    for gpu in report.gpus:
        reasons = gpu.clock_event_reasons
        assert reasons is not None
        assert reasons.active == ("hw_slowdown", "hw_power_brake_slowdown")
        assert reasons.is_active("hw_thermal_slowdown") is False
        assert gpu.fabric is not None and gpu.fabric.state == "Completed"
    assert [g.pci_address for g in report.gpus][:3] == ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0"]
    assert report.gpus[0].pcie.replays_since_reset == 67
    assert report.gpu("0000:3b:00") is report.gpus[1]


def test_rtx4090_unknown_error_is_reported_not_hidden() -> None:
    gpu = parse("nvidia-smi/q-535.154.05-8x-rtx4090-addressing-mode-unknown-error-gpud.txt").gpus[0]
    assert gpu.addressing_mode is None
    assert gpu.errors == ("Addressing Mode: Unknown Error",)
    assert (gpu.pcie.gen_current, gpu.pcie.gen_max, gpu.pcie.gen_host_max) == (1, 4, 5)


def test_v100_volta_ecc_and_unknown_error_host_max() -> None:
    gpu = parse("nvidia-smi/q-550.127.05-v100_x8-thamada-gls.txt").gpus[0]
    assert gpu.ecc.mode_current is True
    assert (gpu.ecc.volatile_corrected, gpu.ecc.volatile_uncorrected) == (0, 0)
    assert gpu.remapped_rows is None  # "Remapped Rows : N/A" on Volta
    assert gpu.retired_pages is not None and gpu.retired_pages.pending is False
    assert gpu.pcie.gen_host_max is None
    assert "PCI/GPU Link Info/PCIe Generation/Host Max: Unknown Error" in gpu.errors


def test_a10_pending_row_remap_and_gh200_aggregate_dbe() -> None:
    a10 = parse("nvidia-smi/q-535.129.03-a10-1gpu-gpud.txt").gpus[0]
    assert a10.remapped_rows is not None
    assert (a10.remapped_rows.uncorrectable, a10.remapped_rows.pending) == (4, True)
    gh200 = parse("nvidia-smi/q-550.127.05-gh200-thamada-gls.txt").gpus[0]
    assert (gh200.ecc.aggregate_uncorrected, gh200.ecc.volatile_uncorrected) == (1, 0)
    assert gh200.remapped_rows is not None and gh200.remapped_rows.uncorrectable == 1


def test_partial_capture_keeps_what_it_has() -> None:
    report = parse("nvidia-smi/q-535.183.01-h100-cut-short-partial-gpud.txt")
    assert report.problems == ("Attached GPUs is 8 but 1 GPU block(s) were found",)
    reasons = report.gpus[0].clock_event_reasons
    assert reasons is not None and reasons.active == ("gpu_idle",)
    # the capture's mangled "Invalid HW Slowdown" labels are surfaced, not guessed
    assert reasons.unrecognised == ("invalid_hw_slowdown", "invalid_hw_thermal_slowdown",
                                    "invalid_hw_power_brake_slowdown")
    assert reasons.is_active("hw_slowdown") is None


def test_590_processes_mig_devices_and_split_power() -> None:
    load = parse("nvidia-smi/q-load-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt").gpus[0]
    assert [(p.pid, p.name, p.used_memory_mib) for p in load.processes] == [
        (10291, "/root/tools/memhog", 2566), (10293, "/root/tools/memhog", 1542),
        (10309, "./gpu_burn", 28234)]
    assert load.power.average_draw_w == 627.32
    assert (load.utilization.gpu_percent, load.memory.used_mib) == (100, 32362)
    assert load.clock_event_reasons is not None and load.clock_event_reasons.active == ()
    mig = parse("nvidia-smi/q-mig-idle-nvidia-h100-mig-590.48.01-nvidia-gpu-exporter.txt").gpus[0]
    assert mig.mig_mode_current is True
    assert [(d.gpu_instance_id, d.multiprocessor_count, d.memory_total_mib) for d in mig.mig_devices] == [
        (2, 60, 40448), (3, 32, 20096), (9, 16, 9984), (10, 16, 9984)]
    assert mig.utilization.gpu_percent is None  # N/A in MIG mode


def test_section_subsets_and_legacy_layout() -> None:
    legacy = parse("nvidia-smi/q-d-MEMORY-UTILIZATION-375.66-legacy-TRUNCATED-gnome-shell-system-monitor-356.txt")
    gpu = legacy.gpus[0]
    assert (gpu.memory.total_mib, gpu.memory.used_mib, gpu.utilization.gpu_percent) == (1995, 1934, 47)
    assert gpu.pci_address == "0000:01:00.0"
    head = parse("nvidia-smi/q-d-MEMORY-UTILIZATION-COMPUTE-head40-580.126.09-a100.txt").gpus[0]
    assert (head.memory.total_mib, head.memory.reserved_mib, head.compute_mode) == (40960, 520, "Default")
    pages = parse("nvidia-smi/q-d-PAGE_RETIREMENT-535.86.10-8gpu-azure-nhc.txt")
    assert [g.pci_address for g in pages.gpus][-1] == "0008:00:00.0"
    assert all(g.retired_pages is not None and g.retired_pages.double_bit == 0
               and g.retired_pages.pending is False for g in pages.gpus)


def test_other_readings_across_generations() -> None:
    titan = parse("nvidia-smi/q-560.35.03-titan-v-gpud.txt").gpus[0]
    assert (titan.temperature.shutdown_c, titan.temperature.slowdown_c) == (100, 97)
    assert titan.ecc.mode_current is None and titan.ecc.volatile_uncorrected is None
    assert len(titan.processes) == 3
    rtx = parse("nvidia-smi/q-570.124.06-rtx5090-thamada-gls.txt").gpus[0]
    assert rtx.clock_event_reasons is not None and rtx.clock_event_reasons.active == ("sw_power_cap",)
    assert (rtx.pcie.width_current, rtx.pcie.width_max) == (8, 16)
    assert rtx.temperature.shutdown_tlimit_c == -5
    h200 = parse("nvidia-smi/q-550.90.12-h200-thamada-gls.txt").gpus[0]
    assert h200.fabric is not None and (h200.fabric.state, h200.fabric.clique_id) == ("Completed", "0")


def test_xml_matches_text_model() -> None:
    t4 = parse("nvidia-smi-xml/q-x-515.105.01-tesla-t4-telegraf.txt").gpus[0]
    assert t4.clock_event_reasons is not None and "gpu_idle" in t4.clock_event_reasons.inactive
    assert (t4.pcie.gen_current, t4.pcie.width_current, t4.pcie.width_max) == (3, 8, 16)
    assert [(p.pid, p.type) for p in t4.processes] == [(675, "G"), (5762, "C")]
    assert t4.retired_pages is not None and t4.retired_pages.single_bit == 0
    a100 = parse("nvidia-smi-xml/q-x-535.54.03-a100-sxm4-80gb-telegraf.txt")
    assert a100.problems == ("Attached GPUs is 4 but 1 GPU block(s) were found",)
    gpu = a100.gpus[0]
    assert gpu.mig_mode_current is True
    assert [d.gpu_instance_id for d in gpu.mig_devices] == [3, 4, 5, 6]
    assert gpu.fabric is not None and gpu.fabric.state is None  # N/A


def test_failure_and_garbage_are_typed() -> None:
    failed = parse_nvidia_smi_query(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n")
    assert failed.failure is not None and failed.failure.kind == DRIVER_NOT_LOADED
    assert (failed.gpus, failed.complete) == ((), False)
    garbage = parse_nvidia_smi_query("hello\nworld\n")
    assert garbage.complete is False and garbage.gpus == ()
    assert isinstance(parse_nvidia_smi_query_xml("<nvidia_log><gpu>\n"), Unparseable)
    assert isinstance(parse_nvidia_smi_query_xml("<nvidia_smi_log><gpu"), Incomplete)  # begun, never closed


def test_xml_cut_at_a_line_end_before_its_closing_tag_is_incomplete() -> None:
    text = read("nvidia-smi-xml/q-x-515.105.01-tesla-t4-telegraf.txt")
    assert text.rstrip().endswith("</nvidia_smi_log>") and parse_nvidia_smi_query_xml(text).complete
    cut = parse_nvidia_smi_query_xml(text[: text.rindex("</nvidia_smi_log>")])
    assert isinstance(cut, Incomplete) and "</nvidia_smi_log>" in incomplete(cut)
