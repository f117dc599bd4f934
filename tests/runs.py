"""The real `gpuconf` command run from a test, as a user or a cron job starts it: a subprocess
(`python -m gpuconf`) in the checkout, with its exit code, its output and its JSON report."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.paths import ROOT


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    report: dict        # the --report file; {} if the run wrote none
    host: str | None = None   # the host that tasks() and findings() read when none is named

    def host_tasks(self, host: str | None = None) -> list[dict]:
        return self.report["hosts"][host or self.host]["tasks"]

    def tasks(self, host: str | None = None) -> dict[str, dict]:
        """The host's tasks by name."""
        return {t["task"]: t for t in self.host_tasks(host)}

    def statuses(self, host: str | None = None) -> dict[str, str]:
        return {t["task"]: t["status"] for t in self.host_tasks(host)}

    def findings(self, severity: str | None = None, host: str | None = None) -> list[dict]:
        return [f for t in self.host_tasks(host) for f in t.get("findings", [])
                if severity is None or f["severity"] == severity]


def gpuconf(*argv: str, report: Path, timeout: float = 600, host: str | None = None) -> Run:
    """`gpuconf ARGV... --report REPORT` from the checkout; `host` is the Run's default host."""
    proc = subprocess.run([sys.executable, "-m", "gpuconf", *argv, "--report", str(report)], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)
    data = json.loads(report.read_text()) if report.exists() else {}
    return Run(proc.returncode, proc.stdout, proc.stderr, data, host)
