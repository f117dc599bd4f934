"""JUnit XML, for CI systems: one testsuite per host, one testcase per task.

What counts as a failure follows the verb. In `check` a task that would
change is a failure (the image or host has drifted); in `apply` only a task
that failed is, and a change is not. In both, `unknown` (the state could not
be read, or the deadline came first) is a failure, an unreachable host is a
failed testcase, and a health finding of severity `failure` fails its task
(a warning too under `--strict`); warnings otherwise go to system-out, where
CI shows them without failing the build. A task's `reboot_pending` is not a
failure: it is a skipped testcase whose message says so.
"""
from __future__ import annotations

import datetime
import re
import xml.etree.ElementTree as ET

from gpuconf.report.redact import visible_changes, visible_error, visible_findings, visible_message, visible_output
from gpuconf.results import HostResult, RunResult, Status, TaskResult

OUTPUT_TAIL = 4000
# XML 1.0 cannot carry these at all, not even escaped; a task's stdout may hold them.
NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    return NOT_XML.sub("\ufffd", text)


def _sanitize(element: ET.Element) -> None:
    for node in element.iter():
        if node.text:
            node.text = _clean(node.text)
        for key, value in node.attrib.items():
            node.attrib[key] = _clean(value)


def _name(task: TaskResult) -> str:
    name = f"{task.role} : {task.task}" if task.role else task.task
    prefix = "handler " if task.handler else ""
    return f"{prefix}{name}"


def _failure(run: RunResult, task: TaskResult) -> tuple[str, str, str] | None:
    """(type, message, detail) when this task fails the testcase, else None."""
    findings = visible_findings(task)
    bad = [f for f in findings if f.fails or (run.strict and f.severity == "warning")]
    if task.status == Status.UNREACHABLE:
        return "unreachable", visible_error(task) or "host unreachable", ""
    if task.status == Status.FAILED:
        return "failed", visible_error(task) or "failed", ""
    if task.status == Status.UNKNOWN:
        return "unknown", visible_error(task) or "state could not be known", ""
    if run.verb == "check" and task.status == Status.WOULD_CHANGE:
        changes = visible_changes(task)
        detail = "\n".join(f"- {c.summary}" + (f"\n{c.diff}" if c.diff and not task.secret else "")
                           for c in changes)
        return "drift", f"drift: {visible_message(task) or task.task}", detail
    if bad:
        message = "; ".join(f"{f.probe}{'' if f.gpu is None else f' gpu {f.gpu}'}: {f.message}" for f in bad)
        return "health", message, ""
    return None


def _system_out(task: TaskResult) -> str:
    lines = []
    message = visible_message(task)
    if message:
        lines.append(f"{task.status.value}: {message}")
    if task.status == Status.CHANGED:
        lines += [f"changed: {c.summary}" for c in visible_changes(task)]
    for finding in visible_findings(task):
        if finding.severity != "ok":
            where = "" if finding.gpu is None else f" gpu {finding.gpu}"
            lines.append(f"{finding.severity}: {finding.probe}{where}: {finding.message}")
    stdout, _ = visible_output(task)
    if stdout:
        lines.append(stdout[-OUTPUT_TAIL:])
    return "\n".join(lines)


def _testcase(run: RunResult, host: HostResult, task: TaskResult) -> tuple[ET.Element, str]:
    """The element and its outcome: 'failure', 'skipped' or 'passed'."""
    case = ET.Element("testcase", {"classname": f"{host.host}.{task.play}", "name": _name(task),
                                   "time": f"{task.duration:.3f}"})
    if task.location:
        case.set("file", task.location.split(":")[0])
    outcome = "passed"
    failure = _failure(run, task)
    if failure:
        kind, message, detail = failure
        element = ET.SubElement(case, "failure", {"type": kind, "message": message[:1000]})
        element.text = detail or message
        outcome = "failure"
    elif task.status == Status.SKIPPED:
        ET.SubElement(case, "skipped", {"message": visible_message(task) or "skipped"})
        outcome = "skipped"
    elif task.status == Status.REBOOT_PENDING:
        ET.SubElement(case, "skipped", {"message": f"reboot pending: {visible_message(task)}"})
        outcome = "skipped"
    out = _system_out(task)
    if out:
        ET.SubElement(case, "system-out").text = out
    _, stderr = visible_output(task)
    if stderr:
        ET.SubElement(case, "system-err").text = stderr[-OUTPUT_TAIL:]
    return case, outcome


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="seconds")


def to_xml(run: RunResult) -> ET.Element:
    root = ET.Element("testsuites", {"name": f"gpuconf {run.verb} {run.playbook}"})
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for name, host in run.hosts.items():
        suite = ET.SubElement(root, "testsuite", {"name": name, "hostname": name, "timestamp": _iso(run.started)})
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        seconds = 0.0
        for task in host.tasks:
            case, outcome = _testcase(run, host, task)
            suite.append(case)
            counts["tests"] += 1
            seconds += task.duration
            if outcome == "failure":
                counts["failures"] += 1
            elif outcome == "skipped":
                counts["skipped"] += 1
        suite.attrib.update({k: str(v) for k, v in counts.items()} | {"errors": "0", "time": f"{seconds:.3f}"})
        for key in totals:
            totals[key] += counts[key]
    duration = (run.ended or run.started) - run.started
    root.attrib.update({k: str(v) for k, v in totals.items()} | {"errors": "0", "time": f"{duration:.3f}"})
    return root


def render(run: RunResult) -> str:
    root = to_xml(run)
    _sanitize(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(run: RunResult, path: str) -> None:
    from gpuconf.files.bounded import write_atomic

    write_atomic(path, render(run))
