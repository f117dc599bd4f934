"""A no-op check of playbooks/a100-node.yml starts at most 15 processes on a converged a100
node (issue 17): each source is read once per host per run, by one process or by the remote
runner itself, and the initramfs is decompressed only when it changed.

What is counted (gpuconf_lab/processes.py): every process of the node that exits during the
check, from the node's own process accounting, which is per PID namespace, so no other node
or lab adds to it, and which counts processes, never threads (the runner's reads run in a
thread pool). sshd's per-connection processes are included (three per connection here: the
session, its privilege-separated child, the user's process that execs sudo), then sudo,
the runner, and what the runner starts: the cost of a check to the node, all of it. On this
machine's kernel (no /proc/modules) the runner falls back to `lsmod`: one more than on a
real node. Counts, never times.
"""
from __future__ import annotations

from collections import Counter

NO_OP_LIMIT = 15
INITRAMFS = "/boot/initrd.img-6.1.0-18-amd64"  # the lab's default kernel
NEVER = {"cat", "uname", "sh", "nvcc", "zcat", "gzip", "cpio", "lsinitramfs", "unmkinitramfs"}


def counted_check(converged, host: str) -> tuple[Counter, int]:
    """The names of the processes a check of `host` started there, and the initramfs's opens."""
    processes = converged.lab.process_count(host)
    opens = converged.lab.file_opens(host, INITRAMFS)
    opens.start()
    processes.start()
    run = converged.checked("a100", "--limit", host)
    started = processes.stop()
    assert run.rc == 0, "the node is not converged: " + run.stdout[-2000:] + run.stderr[-2000:]
    return Counter(p.name for p in started), opens.stop()


def test_a_no_op_a100_check_starts_at_most_15_processes_each_source_once(converged):
    host = converged.hosts("a100")[0]
    converged.lab.exec(host, ["rm", "-rf", "/var/cache/gpuconf"])  # the first check fills the cache
    first, first_opens = counted_check(converged, host)
    second, second_opens = counted_check(converged, host)
    assert first_opens >= 1, "the first check did not read the initramfs"
    assert second_opens == 0, "the initramfs was read again, unchanged"
    for names in (first, second):
        assert sum(names.values()) <= NO_OP_LIMIT, names
        assert names["nvidia-smi"] == 1 and names["dpkg-query"] == 1, names
        assert names["systemctl"] <= 1 and names["dkms"] <= 1 and names["dpkg"] == 0, names
        assert not NEVER & set(names), names
        assert names["sshd"] >= 1 and names["sudo"] == 1  # the counter sees the connection itself
