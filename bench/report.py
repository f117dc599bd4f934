"""The table, the targets, and docs/performance.md (only the parts between the bench markers)."""
from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
from pathlib import Path

from measure import Row

FLOOR_PHASE = {"drift check": "fresh", "apply": "fresh", "no-op check": "after apply"}
ORDER = {"floor": 0, "floor+wait": 1, "floor+request": 1, "floor+reads": 2, "gpuconf": 3, "pyinfra": 4, "ansible": 5}
WORKLOADS = {"fresh": 0, "drift check": 1, "apply": 2, "after apply": 3, "no-op check": 4, "fresh apply": 5}
APPLY_TARGET = 1.5      # issue 27: gpuconf apply of fresh nodes ÷ the apply floor's wall, at 1 and 20 hosts


def machine() -> dict:
    def version(command: list[str]) -> str:
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"
    bench = Path(__file__).resolve().parent
    root = bench.parent
    return {
        "cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "gpuconf": version([str(root / ".venv/bin/gpuconf"), "--version"]),
        "paramiko": version([str(root / ".venv/bin/python"), "-c", "import paramiko; print(paramiko.__version__)"]),
        "ansible": version([str(bench / ".venv/bin/ansible-playbook"), "--version"]),
        "pyinfra": version([str(bench / ".venv/bin/pyinfra"), "--version"]),
        "openssh": version(["sh", "-c", "ssh -V 2>&1"]),
        "commit": version(["git", "-C", str(root), "rev-parse", "--short", "HEAD"]),
    }


def grouped(rows: list[Row]) -> list[dict]:
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        groups.setdefault((row.hosts, row.workload, row.tool), []).append(row)
    floors = {(h, w): statistics.median(r.wall_s for r in rs) for (h, w, t), rs in groups.items() if t == "floor"}
    out = []
    for (hosts, workload, tool), rs in groups.items():
        floor = floors.get((hosts, workload if tool == "floor" else FLOOR_PHASE.get(workload, workload)))
        wall = statistics.median(r.wall_s for r in rs)
        counted = rs[0].self_counted
        out.append({
            "hosts": hosts, "tool": tool, "workload": workload, "runs": len(rs), "wall": wall,
            "wall_range": (min(r.wall_s for r in rs), max(r.wall_s for r in rs)),
            "ratio": wall / floor if floor else None, "cpu": statistics.median(r.cpu_s for r in rs),
            "rss": max(r.peak_rss_mb for r in rs), "busy": statistics.median(r.machine_busy for r in rs),
            "connections": statistics.mean(r.connections for r in rs),
            "round_trips": statistics.mean(r.round_trips for r in rs),
            "round_trips_max": max(r.round_trips_max for r in rs),
            "kib": None if any(r.kib_to_host is None for r in rs) else statistics.mean(r.kib_to_host for r in rs),
            "rcs": sorted({r.rc for r in rs}),
            "self_round_trips": counted.get("round_trips"), "self_connections": counted.get("connections"),
            "statuses": counted.get("statuses", {}),
            "converged": ", ".join(r.self_counted["converged"] for r in rs if "converged" in r.self_counted),
            "lines": statistics.median(r.lines_printed for r in rs),
            "node_processes": statistics.median(r.node_processes for r in rs),
        })
    out.sort(key=lambda g: (g["hosts"], WORKLOADS.get(g["workload"], 9), ORDER.get(g["tool"], 9)))
    return out


def table(rows: list[Row]) -> str:
    lines = ["| Hosts | Tool | Workload | Wall s (median, runs) | × floor | CPU s | Peak RSS MB | Cores busy "
             "| Connections / host | Round trips / host (sshd; gpuconf's own count) | KiB sent / host | Lines printed "
             "| Node processes / host | Exit |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for g in grouped(rows):
        runs = f" ({g['runs']}: {g['wall_range'][0]:.2f}–{g['wall_range'][1]:.2f})" if g["runs"] > 1 else ""
        ratio = f"{g['ratio']:.2f}" if g["ratio"] is not None else ""
        trips = f"{g['round_trips']:.1f}" + (f" (max {g['round_trips_max']})" if g["round_trips_max"] > round(g["round_trips"]) else "")
        if g["self_round_trips"] is not None:
            trips += f"; {g['self_round_trips']:.1f}"
        lines.append(f"| {g['hosts']} | {g['tool']} | {g['workload']} | {g['wall']:.2f}{runs} | {ratio} | "
                     f"{g['cpu']:.2f} | {g['rss']:.0f} | {100 * g['busy']:.0f}% | {g['connections']:.1f} | {trips} | "
                     f"{'—' if g['kib'] is None else format(g['kib'], '.1f')} | "
                     f"{'—' if g['lines'] < 0 else format(g['lines'], '.0f')} | {node_processes_cell(g)} | "
                     f"{','.join(map(str, g['rcs']))} |")
    return "\n".join(lines)


def node_processes_cell(group: dict) -> str:
    """Processes started on each node (the lab's process accounting, sshd's own included)."""
    return "—" if group["node_processes"] < 0 else format(group["node_processes"], ".1f")


def node_processes_target(check: dict) -> list[str]:
    if check["node_processes"] < 0:
        return []
    return [verdict(f"{check['node_processes']:.1f} node processes/host", check["node_processes"] <= 15, "target ≤ 15")]


def targets(rows: list[Row]) -> str:
    by = {(g["hosts"], g["workload"], g["tool"]): g for g in grouped(rows)}
    lines = []
    for hosts in sorted({g["hosts"] for g in by.values()}):
        check = by.get((hosts, "no-op check", "gpuconf"))
        if check is None:
            continue
        parts = []
        if check["ratio"] is not None:
            parts.append(verdict(f"gpuconf ÷ floor {check['ratio']:.2f}", check["ratio"] <= 1.3,
                                 f"target ≤ 1.3, missed by {check['ratio'] / 1.3:.2f}×"))
        replay = by.get((hosts, "no-op check", "floor+request"))
        if replay:
            parts.append(f"gpuconf ÷ floor+request {check['wall'] / replay['wall']:.2f} (the engine's own share)")
        for tool, want in (("pyinfra", 3), ("ansible", 30)):
            peer = by.get((hosts, "no-op check", tool))
            if peer:
                speedup = peer["wall"] / check["wall"]
                parts.append(verdict(f"{tool} ÷ gpuconf {speedup:.1f}", speedup >= want,
                                     f"target ≥ {want}, short by {want / speedup:.2f}×"))
        if hosts == max(g["hosts"] for g in by.values()):
            parts.append(verdict(f"peak RSS {check['rss']:.0f} MB", check["rss"] <= 150,
                                 f"target ≤ 150, over by {check['rss'] / 150:.2f}×"))
        parts.append(verdict(f"round trips {check['round_trips']:.1f}/host (max {check['round_trips_max']})",
                             check["round_trips_max"] <= 2, "target ≤ 2"))
        parts.append(verdict(f"connections {check['connections']:.1f}/host", check["connections"] <= 1, "target 1"))
        parts += node_processes_target(check)
        if check["lines"] >= 0:
            parts.append(verdict(f"{check['lines']:.0f} lines printed", hosts < 100 or check["lines"] <= 30,
                                 "target ≤ 30 at 100 hosts"))
        lines.append(f"* **{hosts} hosts, no-op check:** " + "; ".join(parts))
        apply = by.get((hosts, "apply", "gpuconf"))
        if apply and apply["self_round_trips"] is not None:
            changed = apply["statuses"].get("changed", 0) / hosts
            lines.append(
                f"* **{hosts} hosts, apply of fresh nodes:** {apply['self_round_trips']:.1f} round trips/host "
                f"by gpuconf's count for {changed:.1f} changed tasks/host "
                + verdict("", apply["self_round_trips"] <= 1 + changed, "more than 1 + changed tasks").strip()
                + f"; sshd counts {apply['round_trips']:.1f} channels/host, the difference being the run lock's "
                f"holder (one per connection); {apply['connections']:.1f} connections/host "
                "(the reboot ends the first)")
    return "\n".join(lines)


# issue 17: the no-op check against its floor, measured in the same run. The issue's floor is
# floor+reads (bench/floor_reads.py: connect, then one command that reads the same files, packages,
# GPU fields, units and DKMS state once each); the plain floor (connect + `true`) is shown beside it.
CPU_TARGET = 2.0        # controller CPU per host ÷ floor+reads's CPU per host
WALL_TARGET = 1.5       # no-op check wall ÷ floor+reads's wall
PRINTING_TARGET = 0.10  # printing's share of the controller's CPU at 100 hosts (the profile)


def controller_targets(rows: list[Row], profiles: dict) -> str:
    """One line per host count: the no-op check's CPU and wall against floor+reads and the plain floor
    (after apply) of the same run, and the profile's printing share where one was taken; then the
    same side by side, one table row per host count (issue 17, acceptance 2)."""
    by = {(g["hosts"], g["workload"], g["tool"]): g for g in grouped(rows)}
    profiles = {int(hosts): profile for hosts, profile in (profiles or {}).items()}
    lines = []
    for hosts in sorted({g["hosts"] for g in by.values()}):
        check, floor = by.get((hosts, "no-op check", "gpuconf")), by.get((hosts, "after apply", "floor"))
        if check is None or floor is None or not floor["cpu"]:
            continue
        reads = by.get((hosts, "no-op check", "floor+reads"))
        parts = [f"CPU per host {ms(check, hosts)} ms"]
        if reads and reads["cpu"]:
            parts[0] += " ÷ floor+reads's " + ratio_verdict(ms(reads, hosts), check["cpu"] / reads["cpu"], CPU_TARGET)
        parts[0] += f"; ÷ the plain floor's {ms(floor, hosts)} ms = {check['cpu'] / floor['cpu']:.2f}"
        replay = by.get((hosts, "no-op check", "floor+request"))
        if replay and replay["cpu"]:
            parts.append(f"CPU ÷ floor+request CPU {check['cpu'] / replay['cpu']:.2f} (the same reply received, "
                         "not parsed or judged)")
        if reads:
            parts.append(f"wall {check['wall']:.2f} s ÷ floor+reads's "
                         + ratio_verdict(f"{reads['wall']:.2f}", check["wall"] / reads["wall"], WALL_TARGET, "s"))
        if check["ratio"] is not None:
            parts.append(f"wall ÷ the plain floor {check['ratio']:.2f}")
        profile = profiles.get(hosts)
        if profile:
            share = profile["printing_share"]
            text = f"printing {100 * share:.1f}% of the profiled CPU (imports {100 * profile['imports_share']:.0f}%)"
            parts.append(verdict(text, share < PRINTING_TARGET, f"target < {100 * PRINTING_TARGET:.0f}%")
                         if hosts >= 100 else text)
        if check["lines"] >= 0:
            parts.append(f"{check['lines']:.0f} lines printed")
        lines.append(f"* **{hosts} hosts, controller (no-op check):** " + "; ".join(parts))
    side_by_side = floor_reads_table(by)
    return "\n".join(lines) + ("\n\n" + side_by_side if side_by_side else "")


def ms(group: dict, hosts: int) -> str:
    return f"{1000 * group['cpu'] / hosts:.0f}"


def ratio_verdict(value: str, ratio: float, target: float, unit: str = "ms") -> str:
    return verdict(f"{value} {unit} = {ratio:.2f}", ratio <= target,
                   f"target ≤ {target:g}, over by {ratio / target:.2f}×")


def floor_reads_table(by: dict) -> str:
    """Issue 17, acceptance 2: the no-op check and its floor side by side, one row per host count."""
    lines = []
    for hosts in sorted({key[0] for key in by}):
        check, reads = by.get((hosts, "no-op check", "gpuconf")), by.get((hosts, "no-op check", "floor+reads"))
        if check is None or reads is None or not reads["cpu"] or not reads["wall"]:
            continue
        wall, cpu = check["wall"] / reads["wall"], check["cpu"] / reads["cpu"]
        processes = " / ".join("—" if g["node_processes"] < 0 else f"{g['node_processes']:.1f}" for g in (check, reads))
        lines.append(f"| {hosts} | {check['wall']:.2f} / {reads['wall']:.2f} | {mark(wall, WALL_TARGET)} "
                     f"| {ms(check, hosts)} / {ms(reads, hosts)} | {mark(cpu, CPU_TARGET)} "
                     f"| {'—' if check['lines'] < 0 else format(check['lines'], '.0f')} | {processes} |")
    if not lines:
        return ""
    return "\n".join([
        "Issue 17, the no-op check against floor+reads (medians of the same run):", "",
        "| Hosts | Wall s: gpuconf / floor+reads | Wall ratio (target ≤ 1.5) | CPU ms per host: gpuconf / "
        "floor+reads | CPU ratio (target ≤ 2) | Lines printed by gpuconf | Node processes / host: gpuconf / "
        "floor+reads |",
        "|---:|---:|---:|---:|---:|---:|---:|", *lines])


def apply_table(rows: list[Row]) -> str:
    """Issue 27: apply of fresh nodes (every node reset to its image before each run) against the
    apply floor (bench/floor_apply.py) of the same run; and each tool's no-op check against the plain
    floor after apply."""
    lines = []
    for g in sorted(grouped(rows), key=lambda g: (g["hosts"], g["workload"] != "fresh apply")):
        if g["workload"] == "fresh apply":
            verb = "apply (fresh nodes)"
        elif g["workload"] == "no-op check" and g["tool"] in ("gpuconf", "pyinfra", "ansible"):
            verb = "check (no-op)"
        else:
            continue
        runs = f" ({g['runs']}: {g['wall_range'][0]:.2f}–{g['wall_range'][1]:.2f})" if g["runs"] > 1 else ""
        trips = f"{g['round_trips']:.1f}"
        if g["self_round_trips"] is not None:
            trips += f"; {g['self_round_trips']:.1f}"
        tool = {"floor": "floor (one script)", "floor+wait": "floor, gpuconf's reboot wait"}.get(g["tool"], g["tool"])
        lines.append(f"| {g['hosts']} | {tool} | {verb} | {g['wall']:.2f}{runs} | "
                     f"{'' if g['ratio'] is None else format(g['ratio'], '.2f')} | {g['cpu']:.2f} | "
                     f"{g['connections']:.1f} | {trips} | {g['converged'] or '—'} | {','.join(map(str, g['rcs']))} |")
    if not lines:
        return ""
    return "\n".join([
        "| Hosts | Tool | Verb | Wall s (median, runs: range) | × floor | CPU s | SSH connections / host (sshd) "
        "| Round trips / host (sshd; gpuconf's own count) | In sync after (gpuconf check, every run) | Exit |",
        "|---:|---|---|---:|---:|---:|---:|---:|---|---|", *lines])


def converged(report_file: Path) -> str:
    """'IN_SYNC/HOSTS' from a `gpuconf check --report` file: hosts with nothing to change; '?' if unread."""
    try:
        data = json.loads(report_file.read_text())
    except (OSError, ValueError):
        return "?"
    hosts = data.get("hosts", [])
    hosts = list(hosts.values()) if isinstance(hosts, dict) else hosts
    in_sync = sum(1 for h in hosts if not h.get("stats", {}).get("would_change") and not h.get("stats", {}).get("failed")
                  and not h.get("stats", {}).get("unreachable"))
    return f"{in_sync}/{len(hosts)}"


def apply_targets(rows: list[Row]) -> str:
    """Issue 27's goal: gpuconf apply of fresh nodes ≤ 1.5× the apply floor's wall at 1 and 20 hosts."""
    by = {(g["hosts"], g["workload"], g["tool"]): g for g in grouped(rows)}
    lines = []
    for hosts in sorted({key[0] for key in by}):
        apply = by.get((hosts, "fresh apply", "gpuconf"))
        if apply is None or apply["ratio"] is None:
            continue
        text = f"gpuconf apply {apply['wall']:.2f} s ÷ the apply floor's {apply['wall'] / apply['ratio']:.2f} s"
        line = (ratio_verdict(text, apply["ratio"], APPLY_TARGET, "").replace("  =", " =").rstrip()
                if hosts in (1, 20) else f"{text} = {apply['ratio']:.2f} (the goal is set at 1 and 20 hosts)")
        waiting = by.get((hosts, "fresh apply", "floor+wait"))
        if waiting:
            line += (f"; ÷ the floor waiting for the reboot as gpuconf does (2 s, then every 1 s) "
                     f"{waiting['wall']:.2f} s = {apply['wall'] / waiting['wall']:.2f}")
        for tool in ("pyinfra", "ansible"):
            peer = by.get((hosts, "fresh apply", tool))
            if peer and peer["ratio"] is not None:
                line += f"; {tool} {peer['ratio']:.2f}× the floor ({peer['wall'] / apply['wall']:.2f}× gpuconf)"
        lines.append(f"* **{hosts} hosts, apply of fresh nodes:** {line}")
    return "\n".join(lines)


def apply_markdown(results: dict) -> str:
    """bench/results/apply-*.md: how it was measured, the apply table, the goal's verdicts, the commands."""
    rows = [Row(**r) for r in results["rows"]]
    m = results["machine"]
    when = __import__("time").strftime("%Y-%m-%d %H:%M", __import__("time").localtime(results["started"]))
    argv = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(results["argv"]))
    return "\n\n".join(filter(None, [
        f"# Apply of fresh nodes against the apply floor\n\nMeasured {when} by `{argv}`: {m['cpus']} CPUs, "
        f"{m['memory_gib']} GiB, kernel {m['kernel']}, Python {m['python']}; {m['gpuconf']} at commit "
        f"{m.get('commit', '?')} (plus any uncommitted changes), {m['ansible']}, {m['pyinfra']}, {m['openssh']}.",
        APPLY_FLOOR, apply_table(rows), apply_targets(rows),
        "```sh\n" + commands(rows) + "\n```"])) + "\n"


APPLY_FLOOR = """\
Every apply row starts from nodes reset to their image (`gpuconf lab reset`), in turns: floor,
floor+wait, pyinfra, ansible, gpuconf, --apply-repeat times; after each, an unmeasured `gpuconf
check` counts the nodes it left in sync. The checks follow the last gpuconf apply.

The apply floor (bench/floor_apply.py, bench/peers/floor/apply.sh): per host, one SSH connection
runs `sudo -n sh -s` with a hand-written script on its stdin: gpuconf's own apt-get transactions
(its exact command lines, nine of them on the subnet manager), apt-mark holds, file writes,
update-initramfs, modprobes and systemctl enables, in gpuconf's order, and the reboot gpuconf
takes moved to its end (detached, after the session closes); what needs the driver (fabric
manager, DCGM, the CDI spec) is enabled and starts at the boot. It then logs in again every 0.25 s
until the boot id changes. floor+wait is the same script waiting as gpuconf does (2 s, then every
1 s). Connections per host count those logins (the script's, any during the reboot, the one that
finds the new boot). The check rows' ratio is to the plain floor (connect, run `true`) after apply."""


def mark(ratio: float, target: float) -> str:
    return f"{ratio:.2f} (met)" if ratio <= target else f"{ratio:.2f} (**missed**, {ratio / target:.2f}× over)"


def verdict(text: str, ok: bool, miss: str) -> str:
    return f"{text} (met)" if ok else f"{text} (**missed**: {miss})"


def commands(rows: list[Row]) -> str:
    seen, lines = set(), []
    for row in rows:
        key = (row.tool, row.workload)
        if key not in seen:
            seen.add(key)
            lines.append(f"# {row.tool}, {row.workload} ({row.hosts} hosts)\n{row.command}")
            if row.note:  # floor+reads: the shell line it runs on each host
                lines.append("#   its --command-file runs on each host:\n#   " + row.note.strip())
    return "\n".join(lines)


def block(name: str, text: str) -> str:
    return f"<!-- bench:{name} -->\n{text}\n<!-- /bench:{name} -->"


def write_doc(path: Path, results: dict, table_text: str) -> None:
    rows = [Row(**r) for r in results["rows"]]
    m = results["machine"]
    header = (f"Measured {__import__('time').strftime('%Y-%m-%d %H:%M', __import__('time').localtime(results['started']))}"
              f" by `{' '.join(Path(a).name if i == 0 else a for i, a in enumerate(results['argv']))}`: "
              f"{m['cpus']} CPUs, {m['memory_gib']} GiB, kernel {m['kernel']}, Python {m['python']}; "
              f"{m['gpuconf']} at commit {m.get('commit', '?')} (plus any uncommitted changes), paramiko {m['paramiko']}, {m['ansible']}, {m['pyinfra']}, {m['openssh']}.")
    parts = {
        "table": header + "\n\n" + table_text,
        "targets": "\n".join(filter(None, [targets(rows), controller_targets(rows, results.get("profiles", {}))])),
        "apply": "\n\n".join(filter(None, [apply_table(rows), apply_targets(rows)])),
        "commands": "```sh\n" + commands(rows) + "\n```",
        "inventory": "```\n" + results["big_inventory"] + "\n```",
    }
    if results.get("profile"):
        parts["profile"] = results["profile"]
    text = path.read_text() if path.exists() else "\n\n".join(block(n, "") for n in parts) + "\n"
    for name, body in parts.items():
        pattern = re.compile(rf"<!-- bench:{name} -->.*?<!-- /bench:{name} -->", re.S)
        if pattern.search(text):
            text = pattern.sub(block(name, body).replace("\\", "\\\\"), text)
        else:
            text += "\n" + block(name, body) + "\n"
    path.write_text(text)
