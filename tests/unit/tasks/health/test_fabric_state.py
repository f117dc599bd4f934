"""The fabric-state probe's verdicts on real `nvidia-smi -q` captures and on the failures the
reference lists (In Progress, Insufficient Resources, Unhealthy, no domain on a rack tray)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpuconf.facts.nvidia.query import parse_nvidia_smi_query, parse_query_excerpt
from gpuconf.facts.nvidia.query_model import Fabric
from gpuconf.facts.nvlink_fabric import NVSWITCH, RACK
from gpuconf.tasks.health.fabric_state import fabric_problem, judge_fabric_state
from tests.real import read_real as real


def test_hgx_h200_capture_passes_and_names_each_gpu():
    report = parse_nvidia_smi_query(real("nvidia-smi/q-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt"))
    findings = judge_fabric_state(report, NVSWITCH)
    assert findings and all(f.severity == "ok" for f in findings)
    assert findings[0].message.startswith("GPU 0 (") and "Completed, Success" in findings[0].message


def test_the_same_capture_on_a_rack_tray_is_in_no_domain():
    """An HGX board reports clique 0 and the zero UUID; a GB200 tray must not."""
    report = parse_nvidia_smi_query(real("nvidia-smi/q-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt"))
    findings = judge_fabric_state(report, RACK)
    assert all(f.severity == "failure" and "in no NVLink domain" in f.message for f in findings)


def test_unhealthy_with_status_success_fails():
    excerpt = parse_query_excerpt(real("nvidia-smi/q-fabric-completed-health-unhealthy-grep-C3-dra-driver-626.txt"))
    assert excerpt.fabric is not None and excerpt.fabric.status == "Success"
    assert fabric_problem(excerpt.fabric, rack=True) == "fabric health Unhealthy (bandwidth Full)"


@pytest.mark.parametrize("fabric, rack, reason", [
    (Fabric("In Progress", None, "0", None), False,
     "fabric state In Progress, status N/A: not registered by the fabric manager (running at the driver's version?)"),
    (Fabric("In Progress", None, "32766", "x"), True,
     "fabric state In Progress, status N/A: not registered by the rack's NVLink fabric"),
    (Fabric("Completed", "Insufficient Resources", "0", None), True,
     "fabric state Completed with status Insufficient Resources, want Success"),
    (None, False, "no fabric state in nvidia-smi -q (a driver too old for this GPU's fabric?)"),
    (Fabric("Completed", "Success", "32766", "dc6e40c4-d722-4357-9ba6-5291dd461278", "Healthy"), True, None),
])
def test_reasons(fabric, rack, reason):
    assert fabric_problem(fabric, rack) == reason


def test_a_stuck_gpu_is_named_among_good_ones():
    report = parse_nvidia_smi_query(real("nvidia-smi/q-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt"))
    gpus = list(report.gpus)
    gpus[0] = replace(gpus[0], fabric=Fabric("In Progress", None, "0", None))
    findings = judge_fabric_state(replace(report, gpus=tuple(gpus)), NVSWITCH)
    assert [f.severity for f in findings][:1] == ["failure"] and findings[0].gpu == 0
    assert "In Progress" in findings[0].message and findings[0].bus_id


def test_an_hgx_a100_reports_no_fabric_state_and_passes_but_a_hopper_without_one_fails():
    report = parse_nvidia_smi_query(real("nvidia-smi/q-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt"))
    na = Fabric(None, None)
    ampere = replace(report, gpus=tuple(replace(g, fabric=na, architecture="Ampere") for g in report.gpus))
    assert all(f.severity == "ok" and "reports no fabric state" in f.message
               for f in judge_fabric_state(ampere, NVSWITCH))
    hopper = replace(report, gpus=tuple(replace(g, fabric=na) for g in report.gpus))
    assert all(f.severity == "failure" and "no fabric state" in f.message for f in judge_fabric_state(hopper, NVSWITCH))
