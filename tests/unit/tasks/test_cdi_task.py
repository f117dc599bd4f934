"""cdi_spec and health_cdi_devices as tables: replies in, changes and findings out."""
from __future__ import annotations

import base64

import pytest

from gpuconf.facts.base import file_state
from gpuconf.tasks.base import Unknown
from gpuconf.tasks.registry import TASK_TYPES, build_params
from tests.real import read_real
from tests.unit.facts.test_parsers_cdi import LIST, SPEC
from tests.unit.tasks.test_tasks_table import Conditions, op_text, served

PATH = "/etc/cdi/nvidia.yaml"
PROC = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {}  Release Build  (dvs-builder@U16-A24-9-2)  " \
       "Thu Oct 10 12:15:00 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"


def stat(path: str, text: str | None) -> dict:
    key = file_state(path, follow=path == PATH).key
    if text is None:
        return {key: {"exists": False}}
    return {key: {"exists": True, "kind": "file", "mode": 0o644, "owner": "root", "group": "root",
                  "content_b64": base64.b64encode(text.encode()).decode()}}


def check(name: str, params: dict, replies: dict, reboot_pending: tuple = ()):
    task = TASK_TYPES[name]
    model = build_params(name, task.resolve(params, Conditions(None)))
    return task.check(model, served(replies, task.reads(model), None, reboot_pending, task.host_facts))


def spec_replies(spec: str | None, loaded: str | None) -> dict:
    return {**stat(PATH, spec), **stat("/proc/driver/nvidia/version", PROC.format(loaded) if loaded else None)}


GENERATE = "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"


@pytest.mark.parametrize("spec, loaded, summary", [
    (None, "575.64.03", "generate the CDI spec /etc/cdi/nvidia.yaml for driver 575.64.03"),
    ("real", "580.95.05", "regenerate the CDI spec /etc/cdi/nvidia.yaml: made for driver 575.64.03, 580.95.05 is "
                          "loaded (its library paths name files that no longer exist)"),
    ("cdiVersion: [", "575.64.03", "regenerate the CDI spec /etc/cdi/nvidia.yaml: not YAML at line 1"),
    ("real", None, "generate the CDI spec /etc/cdi/nvidia.yaml once the NVIDIA driver is loaded (none is loaded now)"),
])
def test_a_missing_stale_or_unreadable_spec_is_generated_again(spec, loaded, summary):
    text = read_real(SPEC) if spec == "real" else spec
    verdict = check("cdi_spec", {}, spec_replies(text, loaded))
    assert [c.summary for c in verdict.changes][0].startswith(summary)
    assert [op_text(op) for c in verdict.changes for op in c.ops] == [GENERATE]


def test_with_no_driver_loaded_and_a_reboot_pending_the_spec_waits_for_that_reboot():
    # an image build: the reboot that loads the driver is held, and generating now fails in NVML
    pending = ("the NVIDIA driver 580.178.04 is installed, 580.95.05 is loaded",)
    verdict = check("cdi_spec", {}, spec_replies(None, None), reboot_pending=pending)
    [change] = verdict.changes
    assert change.summary == ("generate the CDI spec /etc/cdi/nvidia.yaml: deferred to the pending reboot "
                              "(the NVIDIA driver 580.178.04 is installed, 580.95.05 is loaded)")
    assert change.reboot and change.ops == []


def test_a_pending_reboot_does_not_defer_a_spec_the_loaded_driver_can_generate():
    verdict = check("cdi_spec", {}, spec_replies(None, "575.64.03"), reboot_pending=("kernel 6.1.0-28 installed",))
    [change] = verdict.changes
    assert not change.reboot and [op_text(op) for op in change.ops] == [GENERATE]


def test_a_spec_made_for_the_loaded_driver_is_in_sync():
    verdict = check("cdi_spec", {}, spec_replies(read_real(SPEC), "575.64.03"))
    assert verdict.changes == []
    assert verdict.message == "/etc/cdi/nvidia.yaml was made for the loaded driver 575.64.03 (3 devices, CDI 0.5.0)"


def test_the_spec_path_is_a_cdi_directory_file_not_any_string():
    with pytest.raises(Exception, match="path"):
        build_params("cdi_spec", {"path": "nvidia.yaml; rm -rf /"})


def cdi_list(out: str, rc: int = 0, err: str = "", timed_out: bool = False) -> dict:
    return {"cdi:list": {"out": out, "err": err, "rc": rc, "timed_out": timed_out}}


def findings(replies: dict, params: dict | None = None):
    return [(f.severity, f.message) for f in check("health_cdi_devices", params or {}, replies).findings]


def test_the_probe_passes_when_all_resolves():
    # the toolkit logs its INFO line to stderr, the names to stdout
    text = read_real(LIST)
    info, names = text.split("\n", 1)
    assert findings(cdi_list(names, err=info)) == [("ok", "nvidia.com/gpu=all resolves (5 CDI devices)")]


@pytest.mark.parametrize("reply, message", [
    (cdi_list("", err="INFO[0000] Found 0 CDI devices\n"), "nvidia.com/gpu=all does not resolve: nvidia-ctk cdi "
                                                           "list found none"),
    (cdi_list("nvidia.com/gpu=0\n"), "nvidia.com/gpu=all does not resolve: nvidia-ctk cdi list found "
                                     "nvidia.com/gpu=0"),
    (cdi_list("", rc=127, err="sh: nvidia-ctk: not found"), "nvidia-ctk is not installed"),
    (cdi_list("", rc=1, err="ERRO[0000] failed to list devices\n"), "failed: ERRO[0000] failed to list devices"),
])
def test_the_probe_fails_when_all_does_not_resolve(reply, message):
    [(severity, text)] = findings(reply)
    assert severity == "failure" and message in text, text


def test_a_hung_or_garbled_list_is_unknown_not_a_pass():
    for reply in (cdi_list("", rc=-9, timed_out=True), cdi_list("INFO[0000] Found 2 CDI devices\nnvidia.com/gpu=all\n")):
        with pytest.raises(Unknown):
            check("health_cdi_devices", {}, reply)


def test_with_a_reboot_pending_a_device_that_does_not_resolve_is_judged_after_it():
    pending = ("the NVIDIA driver 580.178.04 is installed, none is loaded",)
    verdict = check("health_cdi_devices", {}, cdi_list("", err="INFO[0000] Found 0 CDI devices\n"), pending)
    [change] = verdict.changes
    assert change.reboot and change.summary.startswith("CDI device nvidia.com/gpu=all: judged after the pending reboot")
    passing = check("health_cdi_devices", {}, cdi_list("nvidia.com/gpu=all\n", err="INFO[0000] Found 1 CDI devices\n"),
                    pending)
    assert passing.changes == [] and [f.severity for f in passing.findings] == ["ok"]


def test_a_refused_generation_says_nvidia_ctks_own_error_not_its_log():
    from gpuconf.errors import TaskError
    from gpuconf.facts.base import Output
    from tests.real import read_real

    class Host:
        def execute(self, ops, explains_failures=False):
            assert explains_failures
            return [Output("", read_real("nvidia-ctk/cdi-generate-error-minor-number-not-supported-jetson-isaac-ros-163"
                                         ".txt"), rc=1)]

    task = TASK_TYPES["cdi_spec"]
    verdict = check("cdi_spec", {}, spec_replies(None, "580.95.05"))
    with pytest.raises(TaskError) as refused:
        task.apply(Host(), build_params("cdi_spec", task.resolve({}, Conditions(None))), verdict.changes)
    assert str(refused.value).endswith("error getting GPU device minor number: Not Supported")
    assert "Auto-detected mode" not in str(refused.value)
