"""nvidia-smi's reset and recovery action as typed values: `nvidia-smi -r`'s refusal in either wording
(gpuconf/facts/nvidia/reset.py; the remediation's reset reads it, gpuconf/remediate/reset.py), and `-q`'s
"GPU Recovery Action" as a field of each GPU (gpuconf/facts/nvidia/query.py)."""
from __future__ import annotations

from gpuconf.facts.nvidia import parse_gpu_reset, parse_nvidia_smi_query
from gpuconf.facts.xid import RecoveryAction
from gpuconf.remediate.reset import parse_reset
from tests.real import read_real

OLD_WORDING = "nvidia-smi/gpu-reset-refused-in-use-by-another-process-old-wording-gpu-operator-118.txt"
CASES = (OLD_WORDING,)


def test_the_old_refusal_wording_is_a_refusal_because_the_gpu_is_in_use():
    report = parse_gpu_reset(read_real(OLD_WORDING))
    assert report.refused == (("0000:c1:00.0", "in use by another process"),) and report.in_use
    assert report.reset == () and not report.incomplete
    # the reset script's account, with an exit status that is not the new wording's 255
    outcome = parse_reset("stopped nvidia-persistenced\n" + read_real(OLD_WORDING) + "reset-rc 1\n"
                          "started nvidia-persistenced 0\n", 0)
    assert outcome.refused and not outcome.done and outcome.said.startswith("GPU 00000000:C1:00.0 is currently in use")


def test_the_new_wording_and_a_success():
    # as the lab's nvidia-smi prints them (sim/nvsmi_reset.py, from NVIDIA/NVSentinel#1690 and mig-parted's log)
    refused = parse_gpu_reset("\nThe following GPUs could not be reset:\n  GPU 00000000:1A:00.0: In use by another "
                              "client\n\n1 device is currently being used by one or more other processes (e.g., "
                              "Fabric Manager, CUDA application).\n")
    assert refused.refused == (("0000:1a:00.0", "In use by another client"),) and refused.in_use
    done = parse_gpu_reset("GPU 00000000:1A:00.0 was successfully reset.\n")
    assert (done.reset, done.refused, done.in_use) == (("0000:1a:00.0",), (), False)
    cut = parse_gpu_reset("GPU 00000000:C1:00.0 is currently in use by anoth")
    assert cut.incomplete and cut.refused == ()


def test_the_recovery_action_of_nvidia_smi_q_is_a_typed_field():
    h100 = parse_nvidia_smi_query(read_real("nvidia-smi/q-565.57.01-h100sxmx8-thamada-gls.txt"))
    assert len(h100.gpus) == 8 and {g.recovery_action for g in h100.gpus} == {RecoveryAction("none", "None")}
    older = parse_nvidia_smi_query(read_real("nvidia-smi/q-560.35.03-titan-v-gpud.txt"))
    assert older.gpus[0].recovery_action is None  # this driver does not print it
    assert "GPU Recovery Action" not in read_real("nvidia-smi/q-560.35.03-titan-v-gpud.txt")
