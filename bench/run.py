"""`make bench`: gpuconf against the paramiko floor, ansible-core and pyinfra, on the same lab nodes.

    .venv/bin/python bench/run.py [--counts 1,20,100] [--repeat 3] [--skip ansible,pyinfra]
                                  [--skip-above ansible=1] [--peers-fresh] [--profile]
                                  [--lab bench] [--out docs/performance.md]
                                  [--apply-repeat N] [--only apply --hosts 1,20]

For each host count, in one run on one lab (`bench`, N a100 nodes, always taken down at the end):

  fresh nodes   floor and gpuconf check (the drift run), --repeat times, interleaved;
                with --peers-fresh also ansible --check and pyinfra --dry
  apply         gpuconf apply, once
  after apply   floor, gpuconf check (the no-op check: the target workload), floor+request
                (bench/capture_request.py: gpuconf's own first request replayed over a bare paramiko
                connection: the host-side work without gpuconf's controller) and floor+reads
                (bench/floor_reads.py: issue 17's floor, one shell line that reads the same files,
                packages, GPU fields, units and DKMS state once each), --repeat times, interleaved;
                then ansible-playbook --check and pyinfra --dry, once each
  fresh apply   (bench/floor_apply.py) the apply floor, gpuconf apply, ansible-playbook and pyinfra
                (bench/peers/*/: the same changes), --apply-repeat times, interleaved, every node
                reset to its image (`gpuconf lab reset`) before every one of them

--only apply runs the fresh-apply phase alone, then one no-op check of each tool (and the plain
floor) on the nodes the last apply left, and writes bench/results/apply-HOSTS.json and .md (the apply
table) instead of the doc: `bench/run.py --only apply --hosts 1,20 --lab NAME` reruns just that.

Each tool's time is a ratio to the median floor of the same phase. The table goes to stdout and,
between its markers, into docs/performance.md, with the exact commands; bench/results/ keeps the
raw rows as JSON. --profile adds a yappi profile of one no-op check at the largest count and at
every count of 20 hosts or more: where the controller's CPU goes, and the share of it spent printing.
--skip-above ansible=1 runs a peer only up to that many hosts (ansible-core takes many minutes at 20).
--lab names the lab (and its work folder under /tmp), so that two people can bench at once.
--rewrite-doc writes the doc's blocks again from the last run's bench/results/latest.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "lab"))   # the lab's own distribution (make venv installs it too)

import floor_reads  # noqa: E402
import report  # noqa: E402
from measure import Row, gpuconf_counts, run_tool  # noqa: E402
from sshd_log import enable_verbose  # noqa: E402

import inventories  # noqa: E402
from gpuconf_lab.fleet import Lab  # noqa: E402

LAB = "bench"  # --lab (or GPUCONF_BENCH_LAB) changes both
PLAYBOOK = "playbooks/a100-node.yml"
WORK = Path("/tmp/gpuconf-bench")
GPUCONF = str(ROOT / ".venv" / "bin" / "gpuconf")
PEERS_BIN = BENCH / ".venv" / "bin"


def inventory() -> str:
    """The lab's inventory by its path: `-i bench` would name this folder, bench/, not the lab."""
    return str(ROOT / "inventories" / LAB / "hosts.yml")


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rows: list[Row] = []
        self.log = WORK / "tools.log"
        self.profile_text = ""
        self.profiles: dict[int, dict] = {}  # hosts -> profile_check.py's areas and shares

    def say(self, message: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)

    # -- one tool ---------------------------------------------------------------------------------
    def run(self, lab: Lab, names: list[str], tool: str, workload: str, command: list[str],
            env: dict | None = None, report_file: Path | None = None) -> Row:
        with open(self.log, "a") as handle:
            handle.write(f"\n===== {tool} {workload} {len(names)} hosts: {' '.join(command)}\n")
        row = run_tool(tool, workload, command, lab, names, env=env, log=self.log)
        if report_file is not None:
            row.self_counted = gpuconf_counts(report_file)
        self.rows.append(row)
        self.say(f"{tool:8} {workload:12} {row.hosts:4} hosts: {row.wall_s:7.2f} s wall, {row.cpu_s:6.2f} s CPU, "
                 f"{row.peak_rss_mb:6.1f} MB, {row.connections:.1f} conn/host, {row.round_trips:.1f} rt/host, "
                 f"rc {row.rc}")
        return row

    def floor(self, lab, names, files, workload):
        return self.run(lab, names, "floor", workload, [sys.executable, str(BENCH / "floor.py"), str(files["floor"]),
                                                        "--forks", str(self.args.forks)])

    def gpuconf(self, lab, names, verb, workload):
        report_file = WORK / f"report-{verb}-{len(names)}.json"
        return self.run(lab, names, "gpuconf", workload,
                        [GPUCONF, verb, PLAYBOOK, "-i", inventory(), "--forks", str(self.args.forks), "--report",
                         str(report_file)], report_file=report_file)

    def ansible(self, lab, names, files, workload, apply: bool = False):
        env = {"ANSIBLE_CONFIG": str(files["ansible_cfg"]), "ANSIBLE_HOME": str(files["ansible_dir"] / "home"),
               "ANSIBLE_NOCOLOR": "1"}
        playbook = ([str(BENCH / "peers/ansible/a100-node-apply.yml")] if apply
                    else ["--check", str(BENCH / "peers/ansible/a100-node.yml")])
        return self.run(lab, names, "ansible", workload, [str(PEERS_BIN / "ansible-playbook"), *playbook], env=env)

    def pyinfra(self, lab, names, files, workload, apply: bool = False):
        mode = ["--data", "apply=true", "-y"] if apply else ["--dry"]
        return self.run(lab, names, "pyinfra", workload,
                        [str(PEERS_BIN / "pyinfra"), str(files["pyinfra"]), str(BENCH / "peers/pyinfra/deploy.py"),
                         *mode, "--parallel", str(self.args.forks)])

    # -- apply of fresh nodes ---------------------------------------------------------------------
    def reset(self, lab: Lab, names: list[str]) -> None:
        """Every node back to its image (same address and host key), so that each apply starts fresh."""
        started = time.monotonic()
        for name in names:
            lab.reset(name, timeout=60)
        enable_verbose(lab)
        self.say(f"reset {len(names)} nodes to their image in {time.monotonic() - started:.1f} s")

    def apply_phase(self, lab: Lab, names: list[str], files: dict) -> None:
        """The apply floor, gpuconf apply and the peers' apply, each on freshly reset nodes; after
        each, an unmeasured `gpuconf check` says how many nodes it left converged."""
        hosts = len(names)
        for _ in range(self.args.apply_repeat):
            self.reset(lab, names)
            self.converged(self.run(lab, names, "floor", "fresh apply",
                                    [sys.executable, str(BENCH / "floor_apply.py"), str(files["floor"]),
                                     "--forks", str(self.args.forks)]))
            self.reset(lab, names)  # the same script, waiting for the reboot as gpuconf does (2 s, then every 1 s)
            self.run(lab, names, "floor+wait", "fresh apply",
                     [sys.executable, str(BENCH / "floor_apply.py"), str(files["floor"]), "--forks",
                      str(self.args.forks), "--first-pause", "2", "--poll", "1"])
            if self.wanted("pyinfra", hosts):
                self.reset(lab, names)
                self.converged(self.pyinfra(lab, names, files, "fresh apply", apply=True))
            if self.wanted("ansible", hosts):
                self.reset(lab, names)
                self.converged(self.ansible(lab, names, files, "fresh apply", apply=True))
            self.reset(lab, names)  # gpuconf's last: the checks that follow find the nodes it converged
            self.converged(self.gpuconf(lab, names, "apply", "fresh apply"))

    def converged(self, row: Row) -> None:
        """How many nodes an apply left in sync by `gpuconf check` (not measured): that the floor and
        the peers did the same changes as gpuconf."""
        report_file = WORK / "report-converged.json"
        with open(self.log, "a") as handle:
            subprocess.run([GPUCONF, "check", PLAYBOOK, "-i", inventory(), "--forks", str(self.args.forks),
                            "--report", str(report_file)], cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                           check=False)
        row.self_counted["converged"] = report.converged(report_file)
        self.say(f"  gpuconf check afterwards: {row.self_counted['converged']} in sync")

    def peers(self, lab, names, files, workload):
        if self.wanted("ansible", len(names)):
            self.ansible(lab, names, files, workload)
        if self.wanted("pyinfra", len(names)):
            self.pyinfra(lab, names, files, workload)

    def wanted(self, tool: str, hosts: int) -> bool:
        return tool not in self.args.skip and hosts <= self.args.skip_above.get(tool, hosts)

    # -- one host count ---------------------------------------------------------------------------
    def count(self, hosts: int) -> None:
        lab = Lab(LAB, boot_delay=0.5)
        if lab.exists():
            lab.down()
        self.say(f"lab up: {hosts} a100 nodes")
        lab.up({"a100": hosts}, timeout=120)
        try:
            enable_verbose(lab)
            names = [n.name for n in lab.nodes]
            files = inventories.write_all(lab, WORK / f"inventories-{hosts}", self.args.forks)
            self.run(lab, names, "floor", "warm-up", [sys.executable, str(BENCH / "floor.py"), str(files["floor"])])
            self.rows.pop()  # page cache and the nodes' first logins: not measured
            if self.args.only == "apply":
                self.apply_phase(lab, names, files)
                # the check of every tool on the nodes the last apply converged (its plain floor beside it)
                self.floor(lab, names, files, "after apply")
                self.gpuconf(lab, names, "check", "no-op check")
                self.peers(lab, names, files, "no-op check")
                return
            for _ in range(self.args.repeat):
                self.floor(lab, names, files, "fresh")
                self.gpuconf(lab, names, "check", "drift check")
            if self.args.peers_fresh:
                self.peers(lab, names, files, "drift check")
            self.gpuconf(lab, names, "apply", "apply")
            request = self.capture(names[-1], hosts)
            reads = self.reads_command(request)
            for _ in range(self.args.repeat):
                self.floor(lab, names, files, "after apply")
                self.gpuconf(lab, names, "check", "no-op check")
                if request:
                    self.run(lab, names, "floor+request", "no-op check",
                             [sys.executable, str(BENCH / "floor.py"), str(files["floor"]), "--forks",
                              str(self.args.forks), "--command-file", str(request / "command"),
                              "--stdin-file", str(request / "stdin")])
                if reads:
                    self.run(lab, names, "floor+reads", "no-op check",
                             [sys.executable, str(BENCH / "floor.py"), str(files["floor"]), "--forks",
                              str(self.args.forks), "--command-file", str(reads)]).note = reads.read_text()
            self.peers(lab, names, files, "no-op check")
            self.floor(lab, names, files, "after apply")
            if self.args.profile and (hosts >= 20 or hosts == max(self.args.counts)):
                self.profile(lab, names, hosts)
            if self.args.apply_repeat:
                self.apply_phase(lab, names, files)
        finally:
            self.say("lab down")
            lab.down()

    def capture(self, host: str, hosts: int) -> Path | None:
        """gpuconf's first request to one host, replayed by the floor+request rows."""
        out = WORK / f"request-{hosts}"
        with open(self.log, "a") as handle:
            done = subprocess.run([sys.executable, str(BENCH / "capture_request.py"), str(out), "check", PLAYBOOK,
                                   "-i", inventory(), "--limit", host], cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
        return out if done.returncode == 0 else None

    def reads_command(self, request: Path | None) -> Path | None:
        """The issue 17 floor's shell line (bench/floor_reads.py), from the captured request's lists."""
        if request is None:
            return None
        try:
            line = floor_reads.reads_command(floor_reads.request_ops((request / "stdin").read_text()))
        except (OSError, ValueError) as error:
            self.say(f"no floor+reads row: {error}")
            return None
        (request / "reads").write_text(line)
        return request / "reads"

    def profile(self, lab: Lab, names: list[str], hosts: int) -> None:
        """One more no-op check under yappi (bench/profile_check.py); not a row of the table."""
        out = BENCH / "results" / f"profile-{hosts}.md"
        env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / '.venv/lib/python3.11/site-packages'}")
        for stale in (out, out.with_suffix(".json")):
            stale.unlink(missing_ok=True)
        self.say("profiling one no-op check (yappi, CPU clock, every thread)")
        with open(self.log, "a") as handle:
            subprocess.run([str(PEERS_BIN / "python"), str(BENCH / "profile_check.py"), str(out), "check", PLAYBOOK,
                            "-i", inventory(), "--forks", str(self.args.forks)], cwd=ROOT, env=env, stdout=handle,
                           stderr=subprocess.STDOUT, check=False)
        if out.exists():  # the largest count first in the doc
            self.profile_text = (f"One no-op check of {hosts} hosts under yappi (bench/profile_check.py, "
                                 f"bench/results/{out.name}):\n\n" + out.read_text()
                                 + ("\n" + self.profile_text if self.profile_text else ""))
        if out.with_suffix(".json").exists():
            self.profiles[hosts] = json.loads(out.with_suffix(".json").read_text())

    # -- the 10,000-host inventory ----------------------------------------------------------------
    def big_inventory(self) -> str:
        self.say("10,000-host inventory: load, resolve, plan")
        lines = []
        for flag in ([], ["--cpu"]):
            out = subprocess.run([sys.executable, str(BENCH / "big_inventory.py"), *flag], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.strip()
            lines.append(out)
            self.say(out)
        return "\n".join(lines)


def only_apply(bench: Bench, args: argparse.Namespace, started: float) -> int:
    """`--only apply`: the apply table alone, into bench/results/apply-HOSTS.{json,md}."""
    for hosts in args.counts:
        bench.count(hosts)
    results = {"started": started, "ended": time.time(), "argv": sys.argv, "machine": report.machine(),
               "rows": [row.to_json() for row in bench.rows]}
    stem = BENCH / "results" / f"apply-{'-'.join(map(str, args.counts))}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=1))
    text = report.apply_markdown(results)
    stem.with_suffix(".md").write_text(text)
    print("\n" + text)
    print(f"\nwritten: {stem}.json and .md, tool output in {bench.log}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", "--hosts", default="1,20,100", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--apply-repeat", type=int, default=None,
                        help="applies of fresh nodes per tool and host count (default --repeat; 0: none)")
    parser.add_argument("--only", choices=["apply"],
                        help="apply: only the fresh-apply phase and one no-op check per tool; writes "
                             "bench/results/apply-HOSTS.json and .md, not the doc")
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--skip", default="", type=lambda s: set(filter(None, s.split(","))))
    parser.add_argument("--skip-above", default={}, metavar="TOOL=HOSTS[,TOOL=HOSTS]",
                        type=lambda s: {k: int(v) for k, v in (p.split("=") for p in s.split(",") if p)},
                        help="run a peer only at host counts up to this (ansible=1: not at 20 and 100)")
    parser.add_argument("--lab", default=os.environ.get("GPUCONF_BENCH_LAB", "bench"),
                        help="the lab's name (default bench, or $GPUCONF_BENCH_LAB)")
    parser.add_argument("--peers-fresh", action="store_true", help="also run the peers on fresh nodes")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance.md"))
    parser.add_argument("--rewrite-doc", action="store_true",
                        help="measure nothing: write the doc's blocks again from bench/results/latest.json")
    args = parser.parse_args()
    if args.apply_repeat is None:
        args.apply_repeat = args.repeat
    if args.rewrite_doc and args.only == "apply":   # the apply table again from its JSON
        stem = BENCH / "results" / f"apply-{'-'.join(map(str, args.counts))}"
        stem.with_suffix(".md").write_text(report.apply_markdown(json.loads(stem.with_suffix(".json").read_text())))
        print(f"written: {stem}.md from its .json")
        return 0
    if args.rewrite_doc:
        results = json.loads((BENCH / "results" / "latest.json").read_text())
        rows = [Row(**row) for row in results["rows"]]
        report.write_doc(Path(args.out), results, report.table(rows))
        print(f"written: {args.out} from bench/results/latest.json")
        return 0
    global LAB, WORK
    LAB, WORK = args.lab, Path(f"/tmp/gpuconf-{args.lab}")
    if os.geteuid() != 0:
        print("bench: the lab needs root", file=sys.stderr)
        return 1
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    (BENCH / "results").mkdir(exist_ok=True)
    # SIGTERM (make killed, CI timeout) unwinds like Ctrl-C, so that `finally` takes the lab down
    signal.signal(signal.SIGTERM, lambda signum, frame: (_ for _ in ()).throw(KeyboardInterrupt()))
    bench = Bench(args)
    started = time.time()
    if args.only == "apply":
        return only_apply(bench, args, started)
    inventory_line = bench.big_inventory()
    for hosts in args.counts:
        bench.count(hosts)
    results = {"started": started, "ended": time.time(), "argv": sys.argv, "machine": report.machine(),
               "rows": [row.to_json() for row in bench.rows], "big_inventory": inventory_line,
               "profile": bench.profile_text, "profiles": bench.profiles}
    (BENCH / "results" / "latest.json").write_text(json.dumps(results, indent=1))
    table = report.table(bench.rows)
    print("\n" + table)
    report.write_doc(Path(args.out), results, table)
    print(f"\nwritten: {args.out}, bench/results/latest.json, tool output in {bench.log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
