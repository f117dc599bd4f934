"""Where a run's results go: stdout in one format, plus any report files asked for.

`--format` picks what stdout carries. With `json` or `junit` the stdout is
exactly that document, so it can be piped or redirected, and the human lines
go to stderr instead. `--report`, `--junit`, `--prometheus` and `--html` write files
(atomically) whatever the format.

Each writer's module is imported only when its output is asked for: a plain check loads
neither the JUnit XML, the HTML template nor the Prometheus writer.
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gpuconf.errors import GpuconfError, UsageError
from gpuconf.results import RunResult

FORMATS = ("text", "json", "junit")
# option -> the module whose write(run, path) writes that file
WRITERS = {"--report": "gpuconf.report.jsonreport", "--junit": "gpuconf.report.junit",
           "--prometheus": "gpuconf.report.prometheus", "--html": "gpuconf.report.html"}


@dataclass
class OutputOptions:
    format: str = "text"
    report: str | None = None
    junit: str | None = None
    prometheus: str | None = None
    html: str | None = None

    def files(self) -> dict[str, str]:
        named = {"--report": self.report, "--junit": self.junit, "--prometheus": self.prometheus,
                 "--html": self.html}
        return {option: path for option, path in named.items() if path}

    def preflight(self) -> None:
        """Refuse, before anything runs, a report file that could never be written."""
        for option, path in self.files().items():
            target = Path(path)
            if target.is_dir():
                raise UsageError(f"{option} {path}: is a directory; give a file name")
            parent = target.parent
            if not parent.exists():  # a typo in a path must not become a directory tree
                raise UsageError(f"{option} {path}: the directory {parent} does not exist; create it first")
            if not parent.is_dir():
                raise UsageError(f"{option} {path}: {parent} is not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(f"{option} {path}: cannot write in {parent}")


def human_stream(options: OutputOptions) -> TextIO:
    """Where the human reporter writes: stdout, unless stdout carries a document."""
    return sys.stdout if options.format == "text" else sys.stderr


def write_outputs(run: RunResult, options: OutputOptions, stdout: TextIO | None = None) -> None:
    stdout = stdout or sys.stdout
    for option, path in options.files().items():
        writer = importlib.import_module(WRITERS[option])
        try:
            writer.write(run, path)
        except OSError as exc:
            raise GpuconfError(f"{option} {path}: cannot write it: {exc.strerror or exc}") from None
    if options.format == "json":
        from gpuconf.report import jsonreport

        stdout.write(jsonreport.dumps(run))
    elif options.format == "junit":
        from gpuconf.report import junit

        stdout.write(junit.render(run))
    stdout.flush()
