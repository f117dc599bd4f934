"""The simulated systemd: enablement symlinks, Type= semantics, start rules, formats."""
from __future__ import annotations

import json
import os

from gpuconf.facts.systemd import parse_is_active, parse_start_failure, parse_systemctl_show

ONESHOT = """[Unit]
Description=Apply the GPU power limit
After=nvidia-persistenced.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'echo applied >> "$GPUCONF_SIM_ROOT/var/tmp/applied"'

[Install]
WantedBy=multi-user.target
"""


def test_enable_creates_the_real_wants_symlink(node):
    node.write("/etc/systemd/system/gpu-power-limit.service", ONESHOT)
    assert node.systemctl("is-enabled", "gpu-power-limit").stdout == "disabled\n"
    done = node.systemctl("enable", "gpu-power-limit.service")
    link = node.path("/etc/systemd/system/multi-user.target.wants/gpu-power-limit.service")
    assert os.readlink(link) == "/etc/systemd/system/gpu-power-limit.service"
    assert done.stderr == ("Created symlink /etc/systemd/system/multi-user.target.wants/gpu-power-limit.service "
                           "→ /etc/systemd/system/gpu-power-limit.service.\n")
    assert node.systemctl("is-enabled", "gpu-power-limit").returncode == 0
    done = node.systemctl("disable", "gpu-power-limit")
    assert not os.path.lexists(link)
    assert done.stderr == 'Removed "/etc/systemd/system/multi-user.target.wants/gpu-power-limit.service".\n'
    assert node.systemctl("is-enabled", "gpu-power-limit").returncode == 1


def test_a_oneshot_unit_really_runs_at_start_and_at_boot(node):
    node.write("/etc/systemd/system/gpu-power-limit.service", ONESHOT)
    node.systemctl("enable", "--now", "gpu-power-limit", check=True)
    assert node.read("/var/tmp/applied") == "applied\n"
    assert node.systemctl("is-active", "gpu-power-limit").stdout == "active\n"
    node.boot()
    assert node.read("/var/tmp/applied") == "applied\napplied\n"
    show = parse_systemctl_show(node.systemctl("show", "gpu-power-limit", "-p", "ActiveState,SubState,Result").stdout)
    assert (show.active_state, show.sub_state, show.result) == ("active", "exited", "success")


def test_show_prints_properties_in_systemds_order(node):
    node.write("/etc/systemd/system/gpu-power-limit.service", ONESHOT)
    done = node.systemctl("show", "--property", "Id", "--property", "ActiveState", "--property", "SubState",
                          "--property", "LoadState", "gpu-power-limit.service")
    assert done.stdout == ("Id=gpu-power-limit.service\nLoadState=loaded\nActiveState=inactive\nSubState=dead\n")
    missing = node.systemctl("show", "-p", "LoadState,ActiveState", "nothere").stdout
    assert missing == "LoadState=not-found\nActiveState=inactive\n"
    assert node.systemctl("show", "-p", "ActiveState", "--value", "nothere").stdout == "inactive\n"


def test_is_active_codes_and_unknown_units(node):
    done = node.systemctl("is-active", "nothere")
    assert (done.stdout, done.returncode) == ("inactive\n", 3)
    assert parse_is_active(done.stdout) == "inactive"
    done = node.systemctl("start", "nothere")
    assert (done.stderr, done.returncode) == ("Failed to start nothere.service: Unit nothere.service not found.\n", 5)
    assert node.systemctl("is-enabled", "nothere").stderr == \
        "Failed to get unit file state for nothere.service: No such file or directory\n"


def test_a_failing_forking_service_reports_like_systemd(node):
    node.write("/etc/systemd/system/broken.service",
               "[Unit]\nDescription=Broken daemon\n[Service]\nType=forking\nExecStart=/bin/sh -c 'echo no device >&2; exit 1'\n")
    done = node.systemctl("start", "broken")
    assert done.returncode == 1
    assert done.stderr == ('Job for broken.service failed because the control process exited with error code.\n'
                           'See "systemctl status broken.service" and "journalctl -xeu broken.service" for details.\n')
    assert parse_start_failure(done.stderr) is not None
    assert node.systemctl("is-active", "broken").stdout == "failed\n"
    journal = node.run("journalctl", "journalctl", "-u", "broken", "-o", "cat").stdout.splitlines()
    assert journal == ["Starting Broken daemon...", "no device",
                       "broken.service: Control process exited, code=exited, status=1/FAILURE",
                       "broken.service: Failed with result 'exit-code'.", "Failed to start Broken daemon."]
    status = node.systemctl("status", "broken")
    assert status.returncode == 3 and "Active: failed (Result: exit-code)" in status.stdout


def test_a_simple_service_runs_until_stopped(node):
    node.write("/etc/systemd/system/sleeper.service",
               "[Unit]\nDescription=Sleeper\n[Service]\nExecStart=/bin/sleep 600\n[Install]\nWantedBy=multi-user.target\n")
    node.systemctl("start", "sleeper", check=True)
    pid = int(node.systemctl("show", "-p", "MainPID", "--value", "sleeper").stdout)
    assert pid > 0 and os.path.exists(f"/proc/{pid}")
    node.systemctl("stop", "sleeper", check=True)
    assert node.systemctl("is-active", "sleeper").stdout == "inactive\n"
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] == "Z"


def test_a_service_whose_process_dies_is_failed(node):
    node.write("/etc/systemd/system/dies.service",
               "[Unit]\nDescription=Dies\n[Service]\nExecStart=/bin/sh -c 'exit 3'\n")
    node.systemctl("start", "dies", check=True)
    for _ in range(100):
        if node.systemctl("is-active", "dies").stdout == "failed\n":
            break
    assert node.systemctl("show", "-p", "Result,ExecMainStatus", "dies").stdout == "Result=exit-code\nExecMainStatus=3\n"


def test_edited_unit_needs_daemon_reload(node):
    node.write("/etc/systemd/system/gpu-power-limit.service", ONESHOT)
    assert node.systemctl("show", "-p", "NeedDaemonReload", "--value", "gpu-power-limit").stdout == "no\n"
    node.write("/etc/systemd/system/gpu-power-limit.service", ONESHOT.replace("echo applied", "echo changed"))
    assert node.systemctl("show", "-p", "NeedDaemonReload", "--value", "gpu-power-limit").stdout == "yes\n"
    done = node.systemctl("start", "gpu-power-limit")
    assert "changed on disk. Run 'systemctl daemon-reload' to reload units." in done.stderr
    assert node.read("/var/tmp/applied") == "applied\n"           # the cached definition ran
    node.systemctl("daemon-reload", check=True)
    node.systemctl("restart", "gpu-power-limit", check=True)
    assert node.read("/var/tmp/applied") == "applied\nchanged\n"


def test_masked_units_cannot_start(node):
    node.write("/etc/systemd/system/gpu-power-limit.service", ONESHOT)
    assert node.systemctl("mask", "gpu-power-limit").stderr == \
        "Failed to mask unit: File /etc/systemd/system/gpu-power-limit.service already exists.\n"
    node.path("/etc/systemd/system/gpu-power-limit.service").rename(node.path("/lib/systemd/system/gpu-power-limit.service"))
    node.systemctl("mask", "gpu-power-limit", check=True)
    assert node.systemctl("is-enabled", "gpu-power-limit").stdout == "masked\n"
    assert node.systemctl("start", "gpu-power-limit").stderr == \
        "Failed to start gpu-power-limit.service: Unit gpu-power-limit.service is masked.\n"
    node.systemctl("unmask", "gpu-power-limit", check=True)
    node.systemctl("start", "gpu-power-limit", check=True)


def test_machine_units_are_reported_never_run(image, make_node):
    node = make_node(boot=False)
    node.write("/lib/systemd/system/machine-db.service",
               "[Unit]\nDescription=The machine's database\n[Service]\nExecStart=/bin/sh -c 'touch \"$GPUCONF_SIM_ROOT/ran\"'\n"
               "[Install]\nWantedBy=multi-user.target\n")
    os.makedirs(node.path("/etc/systemd/system/multi-user.target.wants"), exist_ok=True)
    os.symlink("/lib/systemd/system/machine-db.service", node.path("/etc/systemd/system/multi-user.target.wants/machine-db.service"))
    units = json.loads(node.read("/usr/lib/gpuconf-lab/machine-units.json")) + ["machine-db.service"]
    node.write("/usr/lib/gpuconf-lab/machine-units.json", json.dumps(units))
    node.boot()
    assert node.systemctl("is-active", "machine-db").stdout == "active\n"
    node.systemctl("restart", "machine-db", check=True)
    assert not node.path("/ran").exists()


def test_units_from_test_roots_never_run_machine_commands(node):
    node.write("/etc/systemd/system/cleanup.service",
               "[Unit]\nDescription=Cleanup\n[Service]\nType=oneshot\nExecStart=/bin/rm -rf /var/tmp/gpuconf-never\n")
    done = node.systemctl("start", "cleanup")
    assert done.returncode == 1      # 203/EXEC: /bin/rm of the machine is not reachable from a test root
    assert "status=203/EXEC" in node.run("journalctl", "journalctl", "-u", "cleanup").stdout


def test_reboot_is_recorded_not_performed_in_tests(node):
    node.systemctl("reboot", check=True)
    assert node.path("/run/gpuconf-lab/reboot-requested").exists()
    assert node.run("power", "shutdown", "-r", "now").returncode == 0
    assert node.run("power", "poweroff").returncode == 1


# as nvidia-cdi-refresh.service gates itself (NVIDIA/nvidia-container-toolkit deployments/systemd/):
# one of the "|" conditions suffices, ExecCondition's 1-254 skips, %v is the running kernel and
# a quoted '\\.' reaches the command as '\.'
CONDITIONAL = """[Unit]
Description=Refresh a spec once the module is there
ConditionPathExists=|/usr/bin/nvidia-smi-absent
ConditionPathExists=|/var/tmp/present
[Service]
Type=oneshot
RemainAfterExit=yes
ExecCondition=/bin/sh -c 'grep -q "/nvidia\\\\.ko" "$GPUCONF_SIM_ROOT/var/tmp/%v.dep"'
ExecStart=/bin/sh -c 'echo refreshed >> "$GPUCONF_SIM_ROOT/var/tmp/refreshed"'
"""


def test_triggering_conditions_and_exec_condition_gate_a_start(node):
    node.write("/etc/systemd/system/refresh.service", CONDITIONAL)
    release = node.run("uname", "-r", check=True).stdout.strip()
    node.systemctl("start", "refresh", check=True)            # no "|" condition holds: skipped, not failed
    assert node.systemctl("is-active", "refresh").stdout == "inactive\n" and not node.path("/var/tmp/refreshed").exists()
    node.write("/var/tmp/present", "")
    node.write(f"/var/tmp/{release}.dep", "kernel/drivers/video/nvidiaXko:\n")   # grep's '\.' is a dot only
    node.systemctl("start", "refresh", check=True)            # the ExecCondition exits 1: skipped
    assert node.systemctl("is-active", "refresh").stdout == "inactive\n" and not node.path("/var/tmp/refreshed").exists()
    node.write(f"/var/tmp/{release}.dep", "kernel/drivers/video/nvidia.ko:\n")
    node.systemctl("start", "refresh", check=True)
    assert node.systemctl("is-active", "refresh").stdout == "active\n"
    assert node.read("/var/tmp/refreshed") == "refreshed\n"
