"""The conformance table: per target, the runs ansible-core passes and how many of them gpuconf
passes, and why the others do not."""
from __future__ import annotations

from collections import Counter

from tests.conformance.runner import TargetResult

ALL_TARGETS = (
    "var_precedence", "var_blending", "var_inheritance", "set_fact", "register", "omit", "assert", "tags",
    "blocks", "handlers", "loops", "include_vars", "include_import", "roles", "roles_arg_spec", "templating",
    "template", "lookup_file", "check_mode", "filter_core", "changed_when", "failed_when", "ignore_errors",
    "any_errors_fatal", "special_vars",
)


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


def markdown(results: list[TargetResult]) -> str:
    lines = ["| target | runs | oracle passes | gpuconf passes | refused / failed / other |", "|---|---|---|---|---|"]
    total: Counter[str] = Counter()
    for result in results:
        found = counts(result)
        total += found
        other = found["oracle"] - found["pass"] - found["refused"] - found["failed"]
        lines.append(f"| {result.name} | {found['runs']} | {found['oracle']} | {found['pass']} | "
                     f"{found['refused']} / {found['failed']} / {other} |")
    other = total["oracle"] - total["pass"] - total["refused"] - total["failed"]
    lines.append(f"| **all** | {total['runs']} | {total['oracle']} | {total['pass']} | "
                 f"{total['refused']} / {total['failed']} / {other} |")
    return "\n".join(lines)


def rewrite_doc(results: list[TargetResult]) -> None:
    raise NotImplementedError
