"""How long `lab up` takes for N nodes and how much memory a node costs (run as root).

    .venv/bin/python bench/lab_startup.py [N]

The image is built first (and cached) so that the timing is the nodes' start only. Memory is
the sum over a node's processes (its PID 1, sshd, and the unshare launcher on the host side):
RSS counts shared libraries once per process, PSS shares them out, so PSS is what N nodes cost.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lab"))   # the lab's own distribution

from gpuconf_lab import image, node  # noqa: E402
from gpuconf_lab.fleet import Lab  # noqa: E402


def memory_kib(pid: int) -> tuple[int, int]:
    rss = pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("Pss:"):
            pss = int(line.split()[1])
    return rss, pss


def node_processes(lab: Lab, name: str) -> list[int]:
    paths = lab.paths.node(name)
    pid = node.init_pid(paths)
    found = node.processes_in_namespace(node.mount_namespace(pid))
    launcher = node.read_pid(paths.launcher_pid_file)
    return sorted(set(found) | ({launcher} if launcher else set()))


def tmpfs_kib(lab: Lab, name: str) -> int:
    pid = node.init_pid(lab.paths.node(name))
    total = 0
    for mount in ("run", "tmp", "dev", "sys", "proc/driver"):
        stat = os.statvfs(f"/proc/{pid}/root/{mount}")
        total += (stat.f_blocks - stat.f_bfree) * stat.f_frsize // 1024
    return total


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    image.ensure_image(print)
    lab = Lab("labbench")
    if lab.exists():
        lab.down()
    started = time.monotonic()
    lab.up({"a100": count - count // 4, "t4": count // 4}, timeout=120)
    elapsed = time.monotonic() - started
    print(f"{count} nodes up (every sshd answering) in {elapsed:.2f}s")
    time.sleep(1)
    per_node = []
    for info in lab.nodes:
        pids = node_processes(lab, info.name)
        rss = sum(memory_kib(pid)[0] for pid in pids)
        pss = sum(memory_kib(pid)[1] for pid in pids)
        per_node.append((rss, pss, tmpfs_kib(lab, info.name), len(pids)))
    rss = sum(row[0] for row in per_node) / count / 1024
    pss = sum(row[1] for row in per_node) / count / 1024
    tmpfs = sum(row[2] for row in per_node) / count / 1024
    print(f"per node: {per_node[0][3]} processes, RSS {rss:.1f} MiB, PSS {pss:.1f} MiB, tmpfs {tmpfs:.2f} MiB")
    image_kib = os.statvfs(lab.paths.image)
    print(f"shared image tmpfs per lab: {(image_kib.f_blocks - image_kib.f_bfree) * image_kib.f_frsize / 2**20:.1f} MiB")
    started = time.monotonic()
    lab.down()
    print(f"down in {time.monotonic() - started:.2f}s")


if __name__ == "__main__":
    main()
