"""The driver stack as a table: host facts and replies in, refusals, changes, ops and
end-of-life findings out (tasks/driver.py, driver/catalog.py, driver/names.py)."""
import base64
import datetime as dt

import pytest

from gpuconf.driver import catalog
from gpuconf.facts.driver_stack import (
    INSTALLED_KERNELS,
    MODULE_STREAM,
    SECURE_BOOT,
    SECURE_BOOT_VARIABLE,
    apt_offered,
    dnf_offered,
    secure_boot,
)
from gpuconf.facts.installed import DPKG_ALL, RPM_ALL, VERSIONLOCK
from gpuconf.tasks.base import Facts, Refused
from gpuconf.tasks.driver import DNF_NAMES, apt_patterns
from gpuconf.tasks.registry import TASK_TYPES, build_params
from tests.platforms import platform_for
from tests.replies import parsed_replies
from tests.unit.tasks.test_tasks_table import op_text

TODAY = dt.date(2026, 12, 4)
A100 = [{"pci_address": "0000:07:00.0", "device_id": "0x20b2"}]
B200 = [{"pci_address": "0000:1b:00.0", "device_id": "0x2901"}]
V100 = [{"pci_address": "0000:3b:00.0", "device_id": "0x1db1"}]
KERNEL = "6.1.0-25-amd64"
DEBIAN = {"os": {"family": "Debian", "major": "12"}, "gpus": A100, "kernel": KERNEL}
ROCKY = {"os": {"family": "RedHat", "major": "9"}, "gpus": A100, "kernel": "5.14.0-427.13.1.el9_4.x86_64"}
SKIPPED = {"rc": 0, "out": "", "err": "", "timed_out": False}
STACK_580_OPEN = ["nvidia-kernel-common-580", "nvidia-dkms-580-open", "libnvidia-compute-580", "nvidia-utils-580"]


def out(text, rc=0):
    return {"rc": rc, "out": text, "err": "", "timed_out": False}


def dpkg(*rows):
    return out("".join(f"{name}\t{version}\t{abbrev}\n" for name, version, abbrev in rows))


def policy(versions: dict[str, list[str]]) -> str:
    text = ""
    for name, offered in versions.items():
        text += f"{name}:\n  Installed: (none)\n  Candidate: {offered[-1]}\n  Version table:\n"
        for version in offered:
            text += f"     {version} 500\n        500 file:/var/lib/gpuconf-lab/repo gpuconf-lab/main amd64 Packages\n"
    return text


def offering(branch: int, versions=("580.95.05-1",), extra=()):
    names = [n.replace("580", str(branch)) for n in STACK_580_OPEN] + [f"nvidia-dkms-{branch}",
                                                                      f"linux-modules-nvidia-{branch}-open-{KERNEL}",
                                                                      *extra]
    return policy({n: list(versions) for n in names})


def replies(installed=(), offered="", secure_boot=False, kernels=(KERNEL,), branch=580,
            rpm=None, module=None):
    reply = {DPKG_ALL.key: dpkg(*installed) if rpm is None else SKIPPED,
             RPM_ALL.key: SKIPPED if rpm is None else out("".join(f"{n}\t{v}\tx86_64\n" for n, v in rpm)),
             VERSIONLOCK.key: {"exists": False},
             apt_offered(apt_patterns(branch)).key: out(offered) if rpm is None else SKIPPED,
             dnf_offered(DNF_NAMES).key: SKIPPED if rpm is None else out(offered),
             MODULE_STREAM.key: ({"exists": True, "kind": "file", "content_b64": base64.b64encode(module.encode()).decode()}
                                 if module else {"exists": False}),
             SECURE_BOOT.key: {"files": {SECURE_BOOT_VARIABLE: "\x06\x00\x00\x00\x01"} if secure_boot else {}},
             INSTALLED_KERNELS.key: {"files": {f"/boot/vmlinuz-{k}": "" for k in kernels}}}
    return reply


def check(params, reply, host=DEBIAN, today=TODAY):
    task = TASK_TYPES["nvidia_driver_stack"]
    model = build_params("nvidia_driver_stack", params)
    reads = task.reads(model)
    return task.check(model, Facts(parsed_replies(reads, reply), reads, host, (), today, platform_for(host),
                                   task.host_facts))


def ops(verdict):
    return [op_text(op) for change in verdict.changes for op in change.ops]


def converged(branch_packages, version, hold="hi"):
    return [(name, version, hold) for name in branch_packages]


WANT_580 = {"branch": 580, "version": "580.95.05"}


def test_a_converged_580_open_stack_is_in_sync_with_no_finding():
    current = {"branch": 580, "version": "580.178.04"}      # the newest point release the catalog knows
    verdict = check(current, replies(converged(STACK_580_OPEN, "580.178.04-1"), offering(580, ("580.178.04-1",))))
    assert verdict.changes == [] and verdict.findings == []
    assert "open 580.178.04 (dkms), held" in verdict.message


def test_a_node_at_535_is_warned_past_end_of_life_and_moved_to_580_in_one_transaction():
    old = converged(["nvidia-driver-535", "nvidia-dkms-535", "nvidia-utils-535", "nvidia-kernel-common-535"],
                    "535.104.05-1")
    verdict = check(WANT_580, replies(old, offering(580)))
    [finding] = [f for f in verdict.findings if f.probe == "driver_branch_eol"]
    assert finding.severity == "warning" and "535 reached its end of life on 2026-06-30" in finding.message
    assert "move to 580" in finding.message
    summary = verdict.changes[0].summary
    assert "purge nvidia-dkms-535 535.104.05-1" in summary and "install nvidia-dkms-580-open 580.95.05-1" in summary
    install, hold = ops(verdict)
    assert "apt-get install" in install and "--purge" in install
    assert "nvidia-dkms-580-open=580.95.05-1" in install and "nvidia-dkms-535-" in install  # one transaction
    assert hold.startswith("apt-mark hold") and "nvidia-utils-580" in hold


def test_an_eol_branch_is_refused_naming_the_branch_to_move_to_unless_allowed():
    with pytest.raises(Refused, match=r"535 reached its end of life.*move to 580.*nvidia_driver_allow_eol"):
        check({"branch": 535, "version": "535.104.05"}, replies(offered=offering(535)))
    stack = converged(["nvidia-kernel-common-535", "nvidia-dkms-535", "libnvidia-compute-535", "nvidia-utils-535"],
                      "535.104.05-1")
    allowed = check({"branch": 535, "version": "535.104.05", "allow_eol": True}, replies(stack, branch=535))
    assert allowed.changes == [] and [f.probe for f in allowed.findings] == ["driver_branch_eol",
                                                                            "driver_point_release_behind"]
    # the same node judged on a day before the end of life: no end-of-life warning (535.104.05 stays behind)
    earlier = check({"branch": 535, "version": "535.104.05"}, replies(stack, branch=535), today=dt.date(2026, 5, 1))
    assert [f.probe for f in earlier.findings] == ["driver_point_release_behind"]


@pytest.mark.parametrize("params, host, pattern", [
    ({"branch": 580, "version": "560.35.03"}, DEBIAN, "disagree"),
    ({"branch": 560, "version": "560.35.03"}, DEBIAN, "not in the branch catalog"),
    ({"branch": 580, "version": "580.95.05", "flavour": "proprietary"}, dict(DEBIAN, gpus=B200),
     "supports only the open kernel modules"),
    ({"branch": 580, "version": "580.95.05", "flavour": "open"}, dict(DEBIAN, gpus=V100), "older than Turing"),
    ({"branch": 595, "version": "595.71.05"}, dict(DEBIAN, gpus=V100), "does not support GPU .* use 580"),
    ({"branch": 535, "version": "535.104.05", "allow_eol": True}, dict(DEBIAN, gpus=B200), "does not support"),
])
def test_refusals_come_before_anything_changes(params, host, pattern):
    with pytest.raises(Refused, match=pattern):
        check(params, replies(offered=offering(params["branch"])), host=host)


def test_a_version_missing_from_the_repositories_is_refused_in_check():
    stack = converged(STACK_580_OPEN, "580.95.05-1")
    with pytest.raises(Refused, match=r"not in this host's repositories: .*580\.105\.08-1 .*offer 580\.95\.05-1.*nothing"):
        check({"branch": 580, "version": "580.105.08"}, replies(stack, offering(580)))


def test_a_transitional_package_is_drift_naming_both_versions():
    stack = converged(STACK_580_OPEN, "580.95.05-1") + [("nvidia-driver-535", "580.95.05-0ubuntu1", "ii ")]
    verdict = check(WANT_580, replies(stack, offering(580)))
    assert ("purge nvidia-driver-535 580.95.05-0ubuntu1 (named for branch 535, carries 580.95.05: "
            "a transitional package)") in verdict.changes[0].summary


def test_a_flavour_switch_says_what_it_purges_installs_and_that_a_reboot_follows():
    proprietary = converged(["nvidia-kernel-common-580", "nvidia-dkms-580", "libnvidia-compute-580",
                             "nvidia-utils-580"], "580.95.05-1")
    verdict = check(dict(WANT_580, flavour="open"), replies(proprietary, offering(580)))
    summary = verdict.changes[0].summary
    assert summary.startswith("switch kernel modules proprietary -> open; a reboot follows")
    assert "purge nvidia-dkms-580 580.95.05-1" in summary and "install nvidia-dkms-580-open 580.95.05-1" in summary


def test_secure_boot_refuses_unsigned_dkms_and_precompiled_modules_cover_every_kernel():
    with pytest.raises(Refused, match="Secure Boot is enabled.*nvidia_driver_modules: precompiled"):
        check(WANT_580, replies(offered=offering(580), secure_boot=True))
    signed = check(dict(WANT_580, dkms_signed=True), replies(offered=offering(580), secure_boot=True))
    assert signed.changes
    newer = "6.1.0-26-amd64"
    offered = offering(580, extra=[f"linux-modules-nvidia-580-open-{newer}"])
    verdict = check(dict(WANT_580, modules="precompiled"),
                    replies(offered=offered, secure_boot=True, kernels=(KERNEL, newer)))
    install = ops(verdict)[0]
    assert f"linux-modules-nvidia-580-open-{KERNEL}=580.95.05-1" in install
    assert f"linux-modules-nvidia-580-open-{newer}=580.95.05-1" in install and "nvidia-dkms" not in install


def test_595_uses_the_unversioned_names_and_the_pinning_package():
    names = ["nvidia-kernel-common", "nvidia-dkms-open", "libnvidia-compute", "nvidia-utils"]
    offered = policy({**{n: ["595.71.05-1"] for n in names}, "nvidia-driver-pinning-595": ["595-1"]})
    verdict = check({"branch": 595, "version": "595.71.05"}, replies(offered=offered, branch=595))
    install, hold = ops(verdict)
    assert "nvidia-dkms-open=595.71.05-1" in install and " nvidia-driver-pinning-595" in install
    assert "nvidia-driver-pinning-595" in hold


def test_an_el9_host_gets_the_module_stream_the_exact_versions_and_versionlock():
    offered = "".join(f"{n}\t3:580.95.05-1.el9\n" for n in DNF_NAMES)
    verdict = check(WANT_580, replies(offered=offered, rpm=[], module="[nvidia-driver]\nname=nvidia-driver\n"
                                                                   "stream=535-dkms\nprofiles=\nstate=enabled\n"),
                    host=ROCKY)
    steps = ops(verdict)
    assert verdict.changes[0].summary.startswith("dnf module stream nvidia-driver:535-dkms -> 580-open")
    assert steps[0].endswith("module reset nvidia-driver") and steps[1].endswith("module enable nvidia-driver:580-open")
    assert "dnf -y -q install --allowerasing -- nvidia-kmod-common-3:580.95.05-1.el9" in steps[2]
    assert "kmod-nvidia-open-dkms-3:580.95.05-1.el9" in steps[2]
    assert steps[3].startswith("dnf -q versionlock add") and "nvidia-driver-3:580.95.05-1.el9" in steps[3]
    rpm = [(n, "3:580.95.05-1.el9") for n in DNF_NAMES if n != "kmod-nvidia-latest-dkms"]
    locked = "".join(f"{n}-3:580.95.05-1.el9.*\n" for n, _ in rpm)
    done = replies(offered=offered, rpm=rpm, module="[nvidia-driver]\nstream=580-open\nstate=enabled\n")
    done[VERSIONLOCK.key] = {"exists": True, "kind": "file", "content_b64": base64.b64encode(locked.encode()).decode()}
    assert check(WANT_580, done, host=ROCKY).changes == []


def test_the_catalog_has_a_source_for_every_row_and_auto_follows_the_gpu():
    rows = catalog.catalog().branches
    assert all(row.source for row in rows) and {535, 580, 595, 620} <= {row.branch for row in rows}
    a100, b200 = catalog.gpus(A100), catalog.gpus(B200)
    assert catalog.auto_flavour(catalog.catalog().get(580), a100) == "open"
    assert catalog.auto_flavour(catalog.catalog().get(535), a100) == "proprietary"
    assert catalog.auto_flavour(catalog.catalog().get(535), b200) == "open"
    assert [b.branch for b in catalog.catalog().supported(TODAY)] == [580, 595, 620]


def task_check(name, params, reply, host=DEBIAN):
    task = TASK_TYPES[name]
    model = build_params(name, params)
    reads = task.reads(model)
    return task.check(model, Facts(parsed_replies(reads, reply), reads, host, (), TODAY, platform_for(host),
                                   task.host_facts))


def test_a_companion_at_another_version_is_drift_naming_both():
    reply = replies([("nvidia-persistenced", "595.71.05-1", "ii ")])
    verdict = task_check("nvidia_driver_companion", {"package": "persistenced", "branch": 580,
                                                     "version": "580.95.05"}, reply)
    assert verdict.changes[0].summary == "nvidia-persistenced 595.71.05-1 installed, the driver is 580.95.05-1"
    assert "nvidia-persistenced=580.95.05-1" in ops(verdict)[0]
    fm = task_check("nvidia_driver_companion", {"package": "fabricmanager", "branch": 580, "version": "580.95.05"},
                    replies())
    assert fm.changes[0].summary == "install nvidia-fabricmanager-580 580.95.05-1 (the driver's version)"
    el = task_check("nvidia_driver_companion", {"package": "fabricmanager", "branch": 580, "version": "580.95.05"},
                    replies(rpm=[("nvidia-fabric-manager", "3:580.95.05-1.el9")]), host=ROCKY)
    assert el.changes[0].summary == "hold nvidia-fabric-manager"


def test_dkms_is_built_for_every_installed_kernel_not_only_the_running_one():
    from gpuconf.tasks.nvidia import dkms_fact
    newer = "6.1.0-26-amd64"
    status = f"nvidia/580.95.05, {KERNEL}, x86_64: installed\n"
    reply = {dkms_fact("nvidia").key: out(status), INSTALLED_KERNELS.key: {"files": {
        f"/boot/vmlinuz-{KERNEL}": "", f"/boot/vmlinuz-{newer}": ""}}}
    verdict = task_check("dkms_module", {"version": "580.95.05"}, reply)
    assert [c.summary for c in verdict.changes] == [f"nvidia 580.95.05 not built for kernel {newer}: dkms autoinstall"]
    assert ops(verdict) == [f"dkms autoinstall -k {newer}"]
    reply[dkms_fact("nvidia").key] = out(status + f"nvidia/580.95.05, {newer}, x86_64: installed\n")
    assert task_check("dkms_module", {"version": "580.95.05"}, reply).changes == []


OPEN_BANNER = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
               "(dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:13:12 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
PROPRIETARY_BANNER = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:13:12 UTC 2025\n"
                      "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


def module_reply(banner, smi="0, 580.95.05\n"):
    from gpuconf.facts.base import file_state
    from gpuconf.facts.nvidia_smi import gpu_query
    return {file_state("/proc/driver/nvidia/version").key: {
        "exists": True, "kind": "file", "content_b64": base64.b64encode(banner.encode()).decode()},
        gpu_query("index", "driver_version").key: out("index, driver_version\n" + smi)}  # the header: --format=csv,nounits


def test_version_truth_names_both_sides():
    params = {"version": "580.95.05"}
    assert task_check("nvidia_module", params, module_reply(OPEN_BANNER)).changes == []
    switched = task_check("nvidia_module", params, module_reply(PROPRIETARY_BANNER))   # auto is open for an A100
    assert switched.changes[0].summary == "loaded nvidia module is proprietary, installed open 580.95.05: reboot required"
    assert switched.changes[0].reboot
    smi = task_check("nvidia_module", params, module_reply(OPEN_BANNER, "0, 580.105.08\n"))
    assert smi.changes[0].summary.startswith("nvidia-smi reports driver 580.105.08, the loaded module is 580.95.05")
    older = task_check("nvidia_module", {"version": "580.105.08"}, module_reply(OPEN_BANNER))
    assert older.changes[0].summary.startswith("loaded nvidia module is 580.95.05 (open), installed 580.105.08")


GRUBBY = ('index=0\nkernel="/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64"\nargs="ro crashkernel=auto rhgb quiet"\n'
          'root="UUID=1b2c"\ninitrd="/boot/initramfs-5.14.0-427.13.1.el9_4.x86_64.img"\ntitle="Rocky Linux"\nid="x"\n'
          'index=1\nkernel="/boot/vmlinuz-0-rescue-abc"\nargs="ro"\nroot="UUID=1b2c"\n')


def test_kernel_cmdline_reads_grubby_and_skips_rescue_entries():
    from gpuconf.tasks.cmdline import BOOT_ENTRIES
    params = {"args": ["rd.driver.blacklist=nouveau", "modprobe.blacklist=nouveau"]}
    verdict = task_check("kernel_cmdline", params, {BOOT_ENTRIES.key: out(GRUBBY)}, host=ROCKY)
    assert ops(verdict) == ["grubby --update-kernel=ALL '--args=rd.driver.blacklist=nouveau modprobe.blacklist=nouveau'"]
    assert verdict.changes[0].reboot
    done = GRUBBY.replace('quiet"', 'quiet rd.driver.blacklist=nouveau modprobe.blacklist=nouveau"')
    assert task_check("kernel_cmdline", params, {BOOT_ENTRIES.key: out(done)}, host=ROCKY).changes == []


def test_gsp_cannot_be_disabled_on_open_modules_and_the_refusal_names_the_xid_remedy():
    from gpuconf.facts.base import file_state
    gsp = {"disable": True, "version": "580.95.05"}
    reply = {file_state("/etc/modprobe.d/nvidia-gsp.conf").key: {"exists": False},
             file_state("/proc/driver/nvidia/version").key: {"exists": False}}
    with pytest.raises(Refused, match=r"open kernel modules \(installed\) require the GSP.*Xid 119.*Xid 120"):
        task_check("gsp_firmware", gsp, reply)   # 580 on an A100: open
    proprietary = task_check("gsp_firmware", dict(gsp, flavour="proprietary"), reply)
    assert ops(proprietary) == ["write /etc/modprobe.d/nvidia-gsp.conf 0644 'options nvidia NVreg_EnableGpuFirmware=0\\n'"]
    reply[file_state("/proc/driver/nvidia/version").key] = module_reply(OPEN_BANNER)[
        file_state("/proc/driver/nvidia/version").key]
    with pytest.raises(Refused, match=r"\(loaded\)"):
        task_check("gsp_firmware", dict(gsp, flavour="proprietary"), reply)


class FailingHost:
    """An apply context whose package transaction fails, recording what was run."""

    host = "el9-01"

    def __init__(self):
        self.ran = []

    def execute(self, ops, explains_failures=False):
        """As the runner does: a failed `run` skips the ops after it (not run: exit -1)."""
        from gpuconf.errors import TaskError
        from gpuconf.facts.base import Output
        results, stopped = [], False
        for op in ops:
            if stopped:
                results.append(Output("", "", -1))
                continue
            self.ran.append(op_text(op))
            failed = " install " in op_text(op) or " shell " in op_text(op)
            results.append(Output("", "Error: Unable to find a match" if failed else "", 1 if failed else 0))
            stopped = failed
            if failed and not explains_failures:
                raise TaskError(f"{op.description} failed (exit 1)")
        return results


def test_a_failed_dnf_transaction_puts_the_old_module_stream_back():
    from gpuconf.errors import TaskError
    offered = "".join(f"{n}\t3:580.95.05-1.el9\n" for n in DNF_NAMES)
    reply = replies(offered=offered, rpm=[("nvidia-driver", "3:535.104.05-1.el9")],
                    module="[nvidia-driver]\nstream=535-dkms\nstate=enabled\n")
    verdict = check(dict(WANT_580, allow_eol=True), reply, host=ROCKY)
    task = TASK_TYPES["nvidia_driver_stack"]
    host = FailingHost()
    with pytest.raises(TaskError, match="Unable to find a match"):
        task.apply(host, build_params("nvidia_driver_stack", dict(WANT_580, allow_eol=True)), verdict.changes)
    assert host.ran[-2:] == ["dnf -y -q module reset nvidia-driver", "dnf -y -q module enable nvidia-driver:535-dkms"]
    assert not any("versionlock add" in step for step in host.ran)   # nothing after the failure


def test_secure_boot_is_the_value_after_the_efi_variables_attributes():
    # efivarfs: 4 bytes of attributes (BOOTSERVICE_ACCESS | RUNTIME_ACCESS), then the value
    assert secure_boot({SECURE_BOOT_VARIABLE: "\x06\x00\x00\x00\x01"}) is True
    assert secure_boot({SECURE_BOOT_VARIABLE: "\x06\x00\x00\x00\x00"}) is False
    assert secure_boot({SECURE_BOOT_VARIABLE: "\x06\x00\x00"}) is False   # cut short: never "enabled"
    assert secure_boot({}) is False   # no variable: a BIOS boot, or no efivarfs
