"""A lab test's run of the real CLI: `gpuconf VERB PLAYBOOK -i LAB --report FILE`, with its exit code,
its output and the JSON report it wrote ({} when it wrote none). The GPU library's lab
(tests/gpu) and the health probes' lab (tests/health) both drive gpuconf this way."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    report: dict
    host: str = ""  # the host tasks() and findings() read

    def host_tasks(self, host: str | None = None) -> list[dict]:
        return self.report["hosts"][host or self.host]["tasks"]

    def statuses(self, host: str | None = None) -> dict[str, str]:
        return {t["task"]: t["status"] for t in self.host_tasks(host)}

    def tasks(self) -> dict[str, dict]:
        return {t["task"]: t for t in self.host_tasks()}

    def findings(self, severity: str | None = None) -> list[dict]:
        return [f for t in self.host_tasks() for f in t.get("findings", [])
                if severity is None or f["severity"] == severity]


def run_gpuconf(lab: str, verb: str, playbook: str, *args: str, report: Path, timeout: float = 600,
                host: str = "") -> Run:
    """Run gpuconf from the repository's root against the lab's inventory (inventories/LAB)."""
    proc = subprocess.run([sys.executable, "-m", "gpuconf", verb, playbook, "-i", lab, "--report", str(report),
                           *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    data = json.loads(report.read_text()) if report.exists() else {}
    return Run(proc.returncode, proc.stdout, proc.stderr, data, host)
