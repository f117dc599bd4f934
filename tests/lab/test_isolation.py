"""Nodes are isolated from each other and from the machine that runs them."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from gpuconf_lab.runtime import STATE_ROOT

PROBE = "/etc/gpuconf-isolation-probe"
DROPPED_CAP_BITS = {"CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_BOOT": 22, "CAP_SYS_TIME": 25,
                    "CAP_SYSLOG": 34}


def test_a_file_written_on_one_node_is_absent_on_the_other_and_on_the_machine(lab, ssh):
    rc, _, err = ssh("a100-01", f"echo secret | sudo tee {PROBE} >/dev/null && echo mine > ~/probe")
    assert rc == 0, err
    try:
        assert ssh("a100-01", f"cat {PROBE} ~/probe")[1] == "secret\nmine\n"
        assert (lab.node("a100-01").upper / PROBE.lstrip("/")).read_text() == "secret\n"
        rc, out, _ = ssh("a100-02", f"ls {PROBE} ~/probe")
        assert rc != 0 and out == ""
        assert not Path(PROBE).exists()
        assert not Path("/home/gpuadmin/probe").exists()
    finally:
        ssh("a100-01", f"sudo rm -f {PROBE} ~/probe")


def test_a_node_cannot_see_the_lab_state_or_another_nodes_upper_dir(lab, ssh):
    rc, out, _ = ssh("a100-02", f"sudo ls -A {STATE_ROOT}")
    assert rc == 0 and out == ""
    other_upper = lab.node("a100-01").upper
    assert other_upper.is_dir()
    rc, _, _ = ssh("a100-02", f"sudo test -e {other_upper}")
    assert rc == 1


def test_a_node_has_its_own_hostname_and_sees_only_its_own_processes(lab, ssh):
    assert ssh("t4-01", "hostname")[1] == "t4-01\n"
    rc, out, _ = ssh("t4-01", "cat /proc/1/cmdline | tr '\\0' ' '; echo; ps -eo args")
    assert rc == 0
    assert "gpuconf_lab/init.py" in out.splitlines()[0]
    assert "pytest" not in out
    assert len(out.splitlines()) < 15, out


def test_sys_and_dev_are_the_nodes_own_with_a_plain_kmsg_and_no_disks(lab, ssh):
    assert Path("/sys/class").is_dir() and Path("/dev/kmsg").exists()   # what the machine has
    rc, out, _ = ssh("a100-01", "ls /dev; ls /sys/class/net 2>&1")
    listing = out.split()
    assert not any(name.startswith(("vd", "sd", "nvme", "loop", "mem")) for name in listing)
    assert {"null", "zero", "urandom", "tty", "ptmx", "pts"} <= set(listing)
    # /dev/kmsg is a plain file the node's log simulators read: a line written to it reaches the
    # node's dmesg, never the machine's kernel log
    assert ssh("a100-01", "stat -c %F /dev/kmsg")[1].strip() in ("regular file", "regular empty file")
    token = f"gpuconf-isolation-{os.getpid()}-{time.time_ns()}"
    assert ssh("a100-01", f"echo '<5>{token}' | sudo tee -a /dev/kmsg")[0] == 0
    assert token in ssh("a100-01", "sudo dmesg")[1]
    machine = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30)
    assert token not in machine.stdout
    mounts = ssh("a100-01", "cat /proc/self/mountinfo")[1]
    fstypes = {line.split(" - ")[0].split()[4]: line.split(" - ")[1].split()[0] for line in mounts.splitlines()}
    assert fstypes["/sys"] == "tmpfs" and fstypes["/dev"] == "tmpfs" and fstypes["/run"] == "tmpfs"
    assert fstypes["/proc"] == "proc" and fstypes["/"] == "overlay"


def test_no_process_in_a_node_holds_the_capabilities_that_reach_the_real_kernel(lab, ssh):
    out = ssh("a100-01", "sudo grep -E '^Cap(Bnd|Eff)' /proc/self/status; sudo grep CapEff /proc/1/status")[1]
    for line in out.splitlines():
        value = int(line.split()[1], 16)
        for name, bit in DROPPED_CAP_BITS.items():
            assert not value & (1 << bit), f"{name} in {line}"
    rc, out, _ = lab.exec("a100-01", "grep CapBnd /proc/self/status")
    assert rc == 0 and not int(out.split()[1], 16) & (1 << DROPPED_CAP_BITS["CAP_SYS_MODULE"])
    # PID 1 keeps exactly one in its permitted set, CAP_SYS_TIME, to set the offsets of each
    # boot's time namespace; what it starts cannot inherit it (bounding and inheritable lack it).
    permitted = int(ssh("a100-01", "sudo grep CapPrm /proc/1/status")[1].split()[1], 16)
    held = {name for name, bit in DROPPED_CAP_BITS.items() if permitted & (1 << bit)}
    assert held == {"CAP_SYS_TIME"}
    init_sets = ssh("a100-01", "sudo grep -E '^Cap(Inh|Bnd)' /proc/1/status")[1].splitlines()
    assert len(init_sets) == 2 and not any(int(line.split()[1], 16) & (1 << DROPPED_CAP_BITS["CAP_SYS_TIME"])
                                           for line in init_sets)


def test_kernel_tunables_are_read_only_inside_a_node(lab, ssh):
    rc, _, err = ssh("a100-01", "echo 1 | sudo tee /proc/sys/vm/drop_caches")
    assert rc != 0 and "Read-only file system" in err
    mountinfo = ssh("a100-01", "cat /proc/self/mountinfo")[1].splitlines()
    options = {line.split()[4]: line.split()[5] for line in mountinfo}
    assert options["/proc/sys"].startswith("ro")
    if Path("/proc/sysrq-trigger").exists():   # only on kernels built with magic SysRq
        assert options["/proc/sysrq-trigger"].startswith("ro")


def test_sshd_listens_on_loopback_addresses_only(lab):
    port = lab.nodes[0].port
    listeners = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, local_port = local.split(":")
        if state == "0A" and int(local_port, 16) == port:   # LISTEN
            octets = [str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)]
            listeners.append(".".join(octets))
    assert all(address.startswith("127.") for address in listeners)   # other labs may be up too
    prefix = lab.nodes[0].address.rsplit(".", 1)[0] + "."
    assert sorted(a for a in listeners if a.startswith(prefix)) == sorted(info.address for info in lab.nodes)


def test_the_machine_sees_none_of_the_nodes_mounts(lab):
    mounts = Path("/proc/self/mounts").read_text()
    assert str(lab.node("a100-01").upper) not in mounts
    assert " /run/gpuconf-lab-fabric " not in mounts
    assert os.path.ismount(lab.paths.image)   # the lab's one mount on the machine: its image copy
