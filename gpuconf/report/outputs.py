"""Where a run's results go: stdout in one format, plus any report files asked for.

`--format` picks what stdout carries. With `json` or `junit` the stdout is
exactly that document, so it can be piped or redirected, and the human lines
go to stderr instead. `--report`, `--junit` and `--prometheus` write files
(atomically) whatever the format.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TextIO

from gpuconf.engine.results import RunResult
from gpuconf.report import jsonreport, junit, prometheus

FORMATS = ("text", "json", "junit")


@dataclass
class OutputOptions:
    format: str = "text"
    report: str | None = None
    junit: str | None = None
    prometheus: str | None = None


def human_stream(options: OutputOptions) -> TextIO:
    """Where the human reporter writes: stdout, unless stdout carries a document."""
    return sys.stdout if options.format == "text" else sys.stderr


def write_outputs(run: RunResult, options: OutputOptions, stdout: TextIO | None = None) -> None:
    stdout = stdout or sys.stdout
    if options.report:
        jsonreport.write(run, options.report)
    if options.junit:
        junit.write(run, options.junit)
    if options.prometheus:
        prometheus.write(run, options.prometheus)
    if options.format == "json":
        stdout.write(json.dumps(jsonreport.to_dict(run), indent=2) + "\n")
    elif options.format == "junit":
        stdout.write(junit.render(run))
    stdout.flush()
