"""`gpuconf gate` on the node: read the signals, remember the kernel log's position, drain.

Every program runs under a timeout that kills its process group (a wedged GPU hangs nvidia-smi
in the kernel). Slurm gives a Prolog no PATH, so the standard directories are added here.
The gate keeps no state on the node: it judges this boot's whole kernel log each time (judge.py),
so the Prolog and Epilog of different jobs, which Slurm runs at the same time on one node, and a
manual `gpuconf gate` see the same faults and change nothing for each other.

With `--slurm` a failing gate drains the node itself, with gpuconf's reason, before it exits
non-zero. slurmctld drains a node whose prolog failed with the reason "Prolog error" only when
the node is not drained already (Slurm 22.05, src/slurmctld/node_mgr.c, validate_node_specs:
`if (!IS_NODE_DRAIN(node_ptr) && !IS_NODE_FAIL(node_ptr))`), so gpuconf's reason stays and
`gpuconf remediate` knows the node for its own. A drain someone else set is never overwritten.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuconf.facts.base import FactUnavailable, Output
from gpuconf.facts.kernel_log import grep_records
from gpuconf.facts.local import run_local
from gpuconf.facts.nvidia import parse_query_csv
from gpuconf.files.bounded import write_atomic
from gpuconf.gate.judge import FAILING, Signals, judge, overall, reason
from gpuconf.scheduler.interface import SchedulerError
from gpuconf.scheduler.slurm import SCONTROL_TIMEOUT, Slurm
from gpuconf.tasks.health.fabric_state import QUERY_FIELDS, query_report
from gpuconf.tasks.health.kernel_log import CANDIDATES, JOURNAL
from gpuconf.tasks.health.readings import HEALTH_FIELDS, RENAMED, parse_readings

if TYPE_CHECKING:
    from gpuconf.facts.nvidia.failure import NvidiaSmiFailure
    from gpuconf.tasks.health.fabric_state import FabricReport
    from gpuconf.tasks.health.readings import GpuReadings

SMI_TIMEOUT = 10.0
LOG_TIMEOUT = 10.0
LOG_TAIL = 5000  # candidate lines kept, as the health probe's read keeps them
FIELDS = tuple(dict.fromkeys((*HEALTH_FIELDS, *QUERY_FIELDS)))
MAX_DROPPED = 8  # fields an old driver may refuse before the gate gives up asking
REFUSED = re.compile(r'^Field "([^"]*)" is not a valid field to query', re.MULTILINE)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PCI = "/sys/bus/pci/devices/*/"


def run(argv: list[str], timeout: float) -> Output:
    """A program, no shell, in its own process group, killed whole at its timeout."""
    env = dict(os.environ, LC_ALL="C", LANG="C", PATH=os.environ.get("PATH", "") + ":" + PATH)
    try:
        ran = run_local(argv, timeout, env=env)
    except OSError as exc:
        return Output("", f"{argv[0]}: {exc.strerror}", 127 if isinstance(exc, FileNotFoundError) else 126,
                      timeout=timeout, argv=tuple(argv))
    return Output(ran.out.decode("utf-8", "replace"), ran.err.decode("utf-8", "replace"), ran.rc, ran.timed_out,
                  timeout, tuple(argv))


def query_gpus(timeout: float = SMI_TIMEOUT) -> tuple[GpuReadings | NvidiaSmiFailure | str, FabricReport | None]:
    """The one nvidia-smi call: the readings (or its failure, or why not as text) and the fabric report.
    A field this driver refuses is dropped (or asked under its old name) within the same timeout."""
    fields, deadline = list(FIELDS), time.monotonic() + timeout
    for _ in range(MAX_DROPPED + 1):
        out = run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,nounits"],
                  max(0.1, deadline - time.monotonic()))
        refused = None if out.timed_out else REFUSED.search(out.stdout) or REFUSED.search(out.stderr)
        if refused is None or refused.group(1) not in fields:
            break
        bad = refused.group(1)
        fields = [RENAMED.get(f, "") if f == bad else f for f in fields]
        fields = [f for f in fields if f]
    try:
        readings = parse_readings(out, timeout)
    except FactUnavailable as exc:
        return str(exc), None
    text = (out.stderr.rstrip("\n") + "\n" if out.stderr.strip() and out.rc else "") + out.stdout
    return readings, query_report(parse_query_csv(text))


def read_log(timeout: float = LOG_TIMEOUT) -> tuple[str | None, str, str]:
    """This boot's candidate kernel log lines: dmesg, else the journal's; (None, "none", why) when neither."""
    error = ""
    for argv, source in ((["dmesg"], "dmesg"), (JOURNAL, "journal")):
        out = run(list(argv), timeout)
        if out.rc == 0 and not out.timed_out:   # the candidate records, each whole
            return grep_records(out.stdout, CANDIDATES, LOG_TAIL), source, ""
        said = (out.stderr or out.stdout).strip().splitlines()
        error = f"did not finish within {timeout:g} s" if out.timed_out else (said[0] if said else f"exit {out.rc}")
    return None, "none", error


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(65536)
    except OSError:
        return None


def pci_files() -> dict[str, str]:
    files = {}
    for pattern in (PCI + "vendor", PCI + "class", PCI + "device"):
        for path in glob.glob(pattern):
            text = read_text(path)
            if text is not None:
                files[path] = text
    return files


def read_signals(smi_timeout: float = SMI_TIMEOUT) -> Signals:
    readings, fabric = query_gpus(smi_timeout)
    log, source, error = read_log()
    return Signals(readings, fabric, log, source, (read_text("/proc/sys/kernel/random/boot_id") or "").strip(),
                   read_text("/proc/driver/nvidia/version"), pci_files(), error)


def drain(node: str, why: str) -> dict[str, str]:
    """Drain the node with gpuconf's reason, unless it is drained already (someone else's reason is
    kept): through the one Slurm client (gpuconf/scheduler/slurm.py), scontrol run here."""
    slurm = Slurm(scontrol, SCONTROL_TIMEOUT)
    try:
        state = slurm.nodes([node]).get(node)
        if state is None:
            return {"action": "error", "reason": why, "error": f"slurm has no node '{node}'"}
        if state.keeps_drain():
            return {"action": "kept", "reason": state.reason or ""}
        slurm.drain(node, why)
    except (SchedulerError, ValueError) as exc:
        return {"action": "error", "reason": why, "error": str(exc)}
    return {"action": "drain", "reason": why}


def scontrol(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Slurm's client on this node, as the gate runs a program (its group killed at the timeout)."""
    out = run(argv, timeout)
    if out.timed_out:
        raise SchedulerError(f"{' '.join(argv[:3])}: no answer within {out.timeout or timeout:g} s")
    return out.rc, out.stdout, out.stderr


@dataclass(frozen=True)
class GateOptions:
    """What `gpuconf gate` is asked (gpuconf/cli/verbs.py builds it)."""

    node: str  # the Slurm node name
    driver_version: str | None = None  # the pinned driver version (None: any)
    nvidia_smi_timeout: float = 10.0
    slurm: bool = False  # a failing gate drains the node first
    report: str | None = None  # also write the JSON verdict here
    pretty: bool = False


def main(options: GateOptions) -> int:
    """0 when the node may run the job (PASS, INFO, WARNING); 1 when it may not (CRITICAL, UNKNOWN)."""
    started = time.monotonic()
    signals = read_signals(options.nvidia_smi_timeout)
    findings = judge(signals, options.driver_version)
    verdict = overall(findings)
    report: dict[str, object] = {"verdict": verdict, "node": options.node, "boot_id": signals.boot_id,
                                 "findings": [f.as_dict() for f in findings]}
    why = reason(findings)
    if options.slurm and why is not None:
        report["slurm"] = drain(options.node, why)
    report["duration_s"] = round(time.monotonic() - started, 3)
    text = json.dumps(report, indent=2 if options.pretty else None, sort_keys=True)
    if options.report:
        write_report(options.report, text)
    print(text)
    sys.stdout.flush()
    return 1 if verdict in FAILING else 0


def write_report(path: str, text: str) -> None:
    with contextlib.suppress(OSError):  # the report is for people; the exit code is what Slurm reads
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_atomic(path, text + "\n")
