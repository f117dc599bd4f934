"""Run one tool once on the lab's nodes and measure it: one row of the table.

The tool runs under bench/tree.py (wall, CPU and peak RSS of its whole process tree), the nodes'
sshd logs say what it cost per host (connections, round trips, bytes), and /proc/stat says how
busy the machine's cores were meanwhile (the nodes' sshd and commands share them with the tool).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sshd_log import LogWindow, per_host

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


@dataclass
class Row:
    tool: str
    workload: str
    hosts: int
    rc: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    processes: int
    machine_busy: float            # share of all cores busy during the run, 0..1
    connections: float             # per host, from sshd
    round_trips: float             # per host, from sshd: session channels with a command
    round_trips_max: int
    kib_to_host: float | None
    self_counted: dict = field(default_factory=dict)  # gpuconf's own report: round trips, connections
    command: str = ""
    note: str = ""
    lines_printed: int = -1        # lines the tool wrote on stdout (-1: not counted, an older results file)
    node_processes: float = -1.0   # processes started on each node, mean per host (-1: not counted)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def cpu_jiffies() -> tuple[int, int]:
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def run_tool(tool: str, workload: str, command: list[str], lab, names: list[str], *, env: dict | None = None,
             cwd: Path = ROOT, log: Path | None = None, timeout: float = 3600) -> Row:
    window = LogWindow(lab, names)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        out_path = out.name
    counters = start_node_counts(lab, names)
    window.start()
    busy_before, total_before = cpu_jiffies()
    full_env = dict(os.environ, **(env or {}))
    with tempfile.TemporaryFile() as stdout, open(log or os.devnull, "ab") as sink:
        subprocess.run([sys.executable, str(BENCH / "tree.py"), out_path, "--", *command], cwd=cwd, env=full_env,
                       stdout=stdout, stderr=sink, timeout=timeout, check=False)
        stdout.seek(0)
        printed = stdout.read()
        sink.write(printed)
    busy_after, total_after = cpu_jiffies()
    time.sleep(0.5)  # sshd writes "Transferred" as the connection closes
    measured = json.loads(Path(out_path).read_text())
    os.unlink(out_path)
    node_processes = stop_node_counts(counters)
    counts = per_host(window.counts())
    return Row(tool=tool, workload=workload, hosts=len(names), rc=measured["rc"], wall_s=measured["wall_s"],
               cpu_s=measured["cpu_s"], peak_rss_mb=measured["peak_rss_mb"], processes=measured["processes"],
               machine_busy=(busy_after - busy_before) / max(1, total_after - total_before),
               connections=counts["connections"], round_trips=counts["round_trips"],
               round_trips_max=counts["round_trips_max"], kib_to_host=counts["kib_received"],
               command=" ".join(command), lines_printed=printed.count(b"\n"), node_processes=node_processes)


def start_node_counts(lab, names: list[str]) -> list:
    """Count every process each node runs from now on (the lab's per-node process accounting,
    gpuconf_lab/processes.py: sshd's per-connection processes included)."""
    counters = [lab.process_count(name) for name in names]
    for counter in counters:
        counter.start()
    return counters


def stop_node_counts(counters: list) -> float:
    """Processes started (and ended) per node since `start_node_counts`, the mean over the nodes."""
    deadline = time.monotonic() + 10  # one wait for all nodes: an apply leaves daemons running for good
    counts = [len(counter.stop(max(0.0, deadline - time.monotonic()))) for counter in counters]
    return sum(counts) / len(counts) if counts else -1.0


def gpuconf_counts(report: Path) -> dict:
    """Round trips and connections per host as gpuconf counted them itself (its JSON report)."""
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        return {}
    hosts = data["hosts"]
    hosts = list(hosts.values()) if isinstance(hosts, dict) else hosts
    if not hosts:
        return {}
    statuses: dict[str, int] = {}
    for host in hosts:
        for name, value in host.get("stats", {}).items():
            statuses[name] = statuses.get(name, 0) + value
    return {"round_trips": sum(h["round_trips"] for h in hosts) / len(hosts),
            "round_trips_max": max(h["round_trips"] for h in hosts),
            "connections": sum(h["connections"] for h in hosts) / len(hosts),
            "exit_code": data.get("exit_code"), "statuses": statuses}
