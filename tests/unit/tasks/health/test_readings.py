"""The shared nvidia-smi fact: one query for every probe, real CSV in, readings out; old
drivers' refused fields dropped by the remote runner within the same timeout; a hang is
driver_unresponsive."""
import os
import sys
import textwrap

import pytest

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.local import LocalConnection
from gpuconf.facts.base import FactUnavailable, Output
from gpuconf.facts.nvidia import NvidiaSmiFailure
from gpuconf.facts.nvidia.failure import DRIVER_UNRESPONSIVE
from gpuconf.tasks.base import Unknown
from gpuconf.tasks.health.readings import (
    HEALTH_FIELDS,
    GpuReadings,
    gpu_readings,
    nvlink_status,
    parse_nvlink,
    parse_readings,
    require_readings,
)
from gpuconf.tasks.registry import TASK_TYPES, build_params
from tests.unit.tasks.health.fakes import SMI, facts_for, hang, real, shell, smi_csv

H200_IDLE = "nvidia-smi/query-gpu-csv-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt"
L40S_BUSY = "nvidia-smi/query-gpu-csv-idle-nvidia-l40s-595.80-nvidia-gpu-exporter.txt"
RTX4080 = "nvidia-smi/query-gpu-csv-idle-nvidia-geforce-rtx-4080-super-595.71.05-nvidia-gpu-exporter.txt"


def test_a_real_h200_capture_reads_into_the_fields_the_probes_judge():
    readings = parse_readings(Output(real(H200_IDLE)), 10)
    (gpu,) = readings.gpus
    assert (gpu.index, gpu.bus_id, gpu.name) == (0, "0000:83:00.0", "NVIDIA H200")
    assert (gpu.temperature_c, gpu.utilization_percent, gpu.persistence) == (28, 0, True)
    assert gpu.clock_reasons.active == ("gpu_idle",) and gpu.clock_reasons_mask == 1
    assert (gpu.memory_used_mib, gpu.memory_total_mib) == (0, 143771)
    assert (gpu.power_draw_w, gpu.power_limit_w) == (77.71, 700)
    assert (gpu.ecc_uncorrected_volatile, gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (0, False, False)
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current) == (5, 5, 16)
    assert (gpu.fabric_state, gpu.fabric_status) == ("Completed", "Success")
    assert readings.missing_fields == ()


def test_a_geforce_without_ecc_reads_none_not_zero():
    (gpu,) = parse_readings(Output(real(RTX4080)), 10).gpus
    assert gpu.ecc_uncorrected_volatile is None and gpu.remapped_rows_pending is None
    assert (gpu.pstate, gpu.pcie_gen_current, gpu.pcie_gen_max) == ("P8", 1, 4)   # idle: downshifted


def test_fields_a_capture_lacks_are_missing_not_guessed():
    readings = parse_readings(Output(real(
        "nvidia-smi/query-gpu-csv-index-name-driver-pstate-pcie-temp-util-mem-h100-595.71.05.txt")), 10)
    (gpu,) = readings.gpus
    assert gpu.temperature_c == 29 and gpu.persistence is None and gpu.clock_reasons is None
    assert "persistence_mode" in readings.missing_fields and "temperature.gpu" not in readings.missing_fields


def test_every_probe_shares_one_fact_whatever_its_timeout():
    keys = {gpu_readings(5).key, gpu_readings(30).key}
    users = [name for name, task in TASK_TYPES.items() if name.startswith("health_")
             and any(f.key == SMI for f in task.reads(build_params(name, {})))]
    assert keys == {SMI}
    assert len(users) >= 10   # temperature, clocks, pcie, ecc, memory, persistence, power, ... all one call


def test_a_hang_is_driver_unresponsive_with_a_failure_finding():
    with pytest.raises(FactUnavailable, match=DRIVER_UNRESPONSIVE):
        parse_readings(Output("", "", -9, timed_out=True), 10)
    with pytest.raises(Unknown) as raised:
        require_readings(facts_for([gpu_readings(10)], {SMI: hang()}), "temperature", 10)
    (finding,) = raised.value.findings
    assert (finding.probe, finding.severity, finding.value) == ("temperature", "failure", DRIVER_UNRESPONSIVE)
    assert "did not answer within 10 s" in finding.message


@pytest.mark.parametrize("capture, kind", [
    ("nvidia-smi/failure-couldnt-communicate-after-unattended-upgrade-shine-cluster-50.txt", "driver_not_loaded"),
    ("nvidia-smi/failure-nvml-driver-library-version-mismatch-580-truenas-19.txt", "driver_library_mismatch"),
])
def test_a_real_nvidia_smi_failure_is_unknown_with_its_kind(capture, kind):
    reply = shell(real(capture), rc=9)
    assert isinstance(parse_readings(Output(reply["out"], rc=9), 10), NvidiaSmiFailure)
    with pytest.raises(Unknown) as raised:
        require_readings(facts_for([gpu_readings(10)], {SMI: reply}), "ecc", 10)
    assert raised.value.findings[0].value == kind and raised.value.findings[0].severity == "failure"


# -- the read itself, run by the remote runner (here, through the local connection) ----------

FAKE_SMI = textwrap.dedent("""\
    #!/bin/sh
    # a fake nvidia-smi: logs each call; refuses the fields listed in $REFUSE as nvidia-smi does
    echo "$*" >> "$LOG"
    [ "$1" = nvlink ] && { echo "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0)"; echo "	 Link 0: 25 GB/s"; exit 0; }
    fields=${1#--query-gpu=}
    for bad in $REFUSE; do
      case ",$fields," in *",$bad,"*) echo "Field \\"$bad\\" is not a valid field to query."; echo; exit 2 ;; esac
    done
    echo "$fields" | sed 's/,/, /g'
    echo "$fields" | sed 's/[^,]*/1/g; s/,/, /g'
    """)


def read_on_this_machine(tmp_path, monkeypatch, fact, refuse: str = "") -> tuple[dict, list[str]]:
    """The fact's request run by the real runner (connection/remote/ through -c local) with a fake
    nvidia-smi first on PATH; its raw reply and the fake's calls."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(FAKE_SMI)
    tool.chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("LOG", str(log))
    monkeypatch.setenv("REFUSE", refuse)
    connection = LocalConnection(ConnectionSpec(host="localhost", connection="local", python=sys.executable))
    (reply,) = connection.call([dict(fact.request)], readonly=True, timeout=60)
    return reply, log.read_text().splitlines()


def test_a_current_driver_answers_every_field_in_one_call(tmp_path, monkeypatch):
    reply, calls = read_on_this_machine(tmp_path, monkeypatch, gpu_readings())
    assert calls == [f"--query-gpu={','.join(HEALTH_FIELDS)} --format=csv,nounits"]
    assert "dropped" not in reply
    assert gpu_readings().parse(reply).missing_fields == ()


def test_an_old_driver_gets_the_old_reasons_name_and_loses_only_unknown_fields(tmp_path, monkeypatch):
    reply, calls = read_on_this_machine(tmp_path, monkeypatch, gpu_readings(),
                                        refuse="clocks_event_reasons.active fabric.state fabric.status")
    assert len(calls) == 4   # refused three times, then answered
    assert "clocks_throttle_reasons.active" in calls[-1] and "fabric.state" not in calls[-1]
    assert reply["dropped"] == ["clocks_event_reasons.active", "fabric.state", "fabric.status"]
    readings = gpu_readings().parse(reply)
    assert isinstance(readings, GpuReadings)
    assert readings.missing_fields == ("fabric.state", "fabric.status")
    assert readings.gpus[0].clock_reasons is not None   # read from the old name


def test_a_driver_that_refuses_the_old_name_too_loses_the_field(tmp_path, monkeypatch):
    reply, calls = read_on_this_machine(tmp_path, monkeypatch, gpu_readings(),
                                        refuse="clocks_event_reasons.active clocks_throttle_reasons.active")
    assert len(calls) == 3 and "clocks_" not in calls[-1]
    assert gpu_readings().parse(reply).missing_fields == ("clocks_event_reasons.active",)


def test_the_retries_stop_at_their_limit(tmp_path, monkeypatch):
    refused = " ".join(HEALTH_FIELDS[:10])
    reply, calls = read_on_this_machine(tmp_path, monkeypatch, gpu_readings(), refuse=refused)
    assert len(calls) == 9 and reply["rc"] == 2   # the first call and 8 retries, then the refusal stands
    with pytest.raises(FactUnavailable, match="is not a valid field"):
        gpu_readings().parse(reply)


def test_nvlink_status_is_its_own_read(tmp_path, monkeypatch):
    reply, calls = read_on_this_machine(tmp_path, monkeypatch, nvlink_status())
    assert calls == ["nvlink -s"]
    status = nvlink_status().parse(reply)
    assert status.gpus[0].active_link_count == 1
    with pytest.raises(FactUnavailable, match=DRIVER_UNRESPONSIVE):
        parse_nvlink(Output("", "", -9, timed_out=True, timeout=7), 10)


def test_real_nvlink_status_of_eight_a100s():
    status = parse_nvlink(Output(real("nvidia-smi/nvlink-s-8x-a100-sxm4-80gb-gpud.txt")), 10)
    assert len(status.gpus) == 8 and status.gpus[7].active_link_count == 12


def test_the_query_is_an_argv_with_one_argument_for_the_fields():
    request = gpu_readings().request
    assert request["op"] == "exec" and request["argv"] == [
        "nvidia-smi", f"--query-gpu={','.join(HEALTH_FIELDS)}", "--format=csv,nounits"]
    assert request["drop_refused"] == {"prefix": "--query-gpu=", "max": 8,
                                       "refused": '^Field "([^"]*)" is not a valid field to query',
                                       "renames": {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}}


def test_a_synthetic_csv_round_trips_through_the_real_parser():
    readings = parse_readings(Output(smi_csv(8, gpu3={"temperature.gpu": "91"})), 10)
    assert [g.index for g in readings.gpus] == list(range(8))
    assert readings.gpus[3].temperature_c == 91 and readings.gpus[3].bus_id == "0000:4e:00.0"
