"""The conformance table: per target, the runs ansible-core passes, how many of them gpuconf passes
(and passed before issue 38's work: baseline.json), and why the others do not."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from tests.conformance.runner import HERE, ROOT, TargetResult

ALL_TARGETS = (
    "var_precedence", "var_blending", "var_inheritance", "set_fact", "register", "omit", "assert", "tags",
    "blocks", "handlers", "loops", "include_vars", "include_import", "roles", "roles_arg_spec", "templating",
    "template", "lookup_file", "check_mode", "filter_core", "changed_when", "failed_when", "ignore_errors",
    "any_errors_fatal", "special_vars",
)
DOC = ROOT / "docs" / "ansible.md"
BEGIN, END = "<!-- conformance table: make conformance writes it -->", "<!-- end of the conformance table -->"
# what a target's runs that gpuconf does not pass are about, where a few words say it better than
# the runs' own messages (written from the results; `make conformance` keeps the counts current)
NOTES: dict[str, str] = {
    "omit": "C75692.yml names its files by relative paths (`path: foo`), which gpuconf refuses (a node's files "
            "are named from /), and reads them with `stat` (gpuconf's `probe`)",
    "tags": "ansible_run_tags.yml asks for tags no task has, so that only its `always` tasks run, and "
            "test_template_parent_tags.yml skips every task: gpuconf refuses a tag filter that selects nothing "
            "but `always` tasks (a check would say in sync having checked nothing: the refusals table above)",
    "handlers": "a role of a collection (collections are refused), ANSIBLE_ERROR_ON_MISSING_HANDLER=false (gpuconf "
                "always refuses a notify that finds no handler), a --skip-tags that leaves no task",
    "include_import": "a module of the play's own library/ (gpuconf runs its own task types, no plugins)",
    "roles": "role_complete.yml -vvv counts the module arguments Ansible prints at -vvv (`\"invocation\": "
             "{\"module_args\": ...}`), which gpuconf's report does not carry; privacy.yml with "
             "ANSIBLE_PRIVATE_ROLE_VARS set: gpuconf has Ansible's default (unset) only; =1 the shim refuses, =0 "
             "(which makes an include_role public unless it says otherwise) fails",
    "roles_arg_spec": "test_tags.yml --tags bar selects only the `always` validation task (the tags refusal)",
    "template": "filter_plugins.yml includes a role with filter_plugins/: gpuconf loads no plugins (the refusals "
                "table above)",
    "check_mode": "the `stat` module (gpuconf's `probe` reads a file's state)",
    "set_fact": "a fact cache across runs (ANSIBLE_CACHE_PLUGIN): gpuconf keeps no facts between runs",
}


def counts(result: TargetResult) -> Counter[str]:
    found: Counter[str] = Counter()
    for run in result.runs:
        found["runs"] += 1
        if run.oracle == "pass":
            found["oracle"] += 1
            found[run.gpuconf] += 1
    return found


def summary(result: TargetResult) -> str:
    found = counts(result)
    rest = ", ".join(f"{k} {v}" for k, v in sorted(found.items()) if k not in ("runs", "oracle", "pass"))
    return f"{result.name}: {found['pass']}/{found['oracle']} of the oracle's passing runs ({found['runs']} runs)" \
        + (f"; {rest}" if rest else "")


def _baseline() -> dict[str, dict[str, int]]:
    path = HERE / "baseline.json"
    return json.loads(path.read_text())["targets"] if path.exists() else {}


def _reason(why: str) -> str:
    """A run's reason, short: the message without its paths and host details."""
    text = re.sub(r"\s+", " ", why)
    text = re.sub(r"/\S*/integration/targets/", "", text)
    text = re.sub(r"^gpuconf: error: ", "", text)
    text, _, settings = text.partition(" [Ansible settings")
    return text[:150].rstrip() + ("…" if len(text) > 150 else "") + (f" [Ansible settings{settings}" if settings else "")


def markdown(results: list[TargetResult]) -> str:
    before = _baseline()
    lines = ["| target | runs | passed by ansible-core | passed by gpuconf (before) | refused | failed | other |",
             "|---|---|---|---|---|---|---|"]
    total: Counter[str] = Counter()
    total_before = 0
    for result in results:
        found = counts(result)
        total += found
        was = before.get(result.name, {}).get("gpuconf_passes")
        total_before += was or 0
        other = found["oracle"] - found["pass"] - found["refused"] - found["failed"]
        lines.append(f"| {result.name} | {found['runs']} | {found['oracle']} | {found['pass']}"
                     f"{f' ({was})' if was is not None else ''} | {found['refused']} | {found['failed']} | {other} |")
    other = total["oracle"] - total["pass"] - total["refused"] - total["failed"]
    lines.append(f"| **all** | {total['runs']} | {total['oracle']} | **{total['pass']}** ({total_before}) | "
                 f"{total['refused']} | {total['failed']} | {other} |")
    return "\n".join(lines)


def reasons(results: list[TargetResult]) -> str:
    """Per target, each run ansible-core passes and gpuconf does not: what happened."""
    lines = []
    for result in results:
        left = [run for run in result.runs if run.oracle == "pass" and run.gpuconf != "pass"]
        if not left:
            continue
        lines.append(f"- **{result.name}**" + (f": {NOTES[result.name]}" if result.name in NOTES else ""))
        for run in left:
            what = _reason(run.why) if run.why else (run.checks[0] if run.checks else "")
            lines.append(f"  - run {run.index} (`{' '.join(run.argv)[:70]}`): {run.gpuconf}: {what}")
    return "\n".join(lines)


def measured_at() -> str:
    """The date and gpuconf's commit a run measured (a worktree with changes says so)."""
    import datetime
    import subprocess

    def git(*argv: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = " with uncommitted changes" if git("status", "--porcelain", "--untracked-files=no", "gpuconf") else ""
    return f"{datetime.date.today().isoformat()}, gpuconf at commit {commit}{dirty}"


def rewrite_doc(results: list[TargetResult], measured: str) -> None:
    """The table and the reasons into docs/ansible.md; `measured`: when, and at which commit."""
    text = DOC.read_text()
    found = counts_all(results)
    block = "\n".join([BEGIN, "", f"Measured {measured}, against ansible-core 2.19.14 (`make conformance`).", "",
                       markdown(results), "",
                       f"gpuconf passes **{found['pass']} of the {found['oracle']} runs** ansible-core passes "
                       f"({100 * found['pass'] / max(1, found['oracle']):.1f} %). The runs it does not pass:", "",
                       reasons(results), "", END])
    if BEGIN in text:
        start, end = text.index(BEGIN), text.index(END) + len(END)
        text = text[:start] + block + text[end:]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(text)


def counts_all(results: list[TargetResult]) -> Counter[str]:
    total: Counter[str] = Counter()
    for result in results:
        total += counts(result)
    return total


def load(path: Path) -> list[TargetResult]:
    from tests.conformance.runner import Run

    return [TargetResult(t["name"], [Run(**r) for r in t["runs"]], t["oracle_seconds"], t["gpuconf_seconds"],
                         t.get("note", "")) for t in json.loads(path.read_text())]
