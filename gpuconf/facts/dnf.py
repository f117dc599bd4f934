"""What dnf says when a transaction cannot run: pure parser of its error (stdout and stderr together).

Real captures (rocky-linux/rockylinux.org issue 201, EL 10 with NVIDIA's CUDA repository)::

    Error:
     Problem: package nvidia-open-3:580.65.06-1.el10.noarch from cuda-rhel10-x86_64 requires
       nvidia-settings = 3:580.65.06, but none of the providers can be installed
      - conflicting requests
      - package nvidia-settings-3:580.65.06-1.el10.x86_64 from cuda-rhel10-x86_64 is filtered out
        by modular filtering

    All matches were filtered out by modular filtering for argument: cuda-drivers
    Error: Unable to find a match: cuda-drivers

Modular filtering hides a repository's packages that belong to a module stream which is not the
enabled one (or to a module when a non-modular package is asked for): the packages are there, dnf
will not take them until the stream is switched or reset (``dnf module reset nvidia-driver``, then
enable the stream of the wanted branch, or install without the module).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import reads_whole_lines


@dataclass(frozen=True)
class Filtered:
    """A package (or an argument's every match) dnf left out, and the filter: ``modular``, ``exclude``."""

    what: str
    by: str
    repo: str | None = None


@dataclass(frozen=True)
class DnfError:
    """``problems``: each ``Problem:`` line's text; ``filtered``: what a filter hid; ``no_match``: the
    arguments dnf found nothing for."""

    problems: tuple[str, ...] = ()
    filtered: tuple[Filtered, ...] = ()
    no_match: tuple[str, ...] = ()
    incomplete: str = ""

    @property
    def modular_filtering(self) -> bool:
        return any(f.by == "modular" for f in self.filtered)

    def cause(self) -> str | None:
        """The refusal in one sentence with what to do, or None when dnf named no cause gpuconf knows."""
        modular = [f for f in self.filtered if f.by == "modular"]
        if modular:
            hidden = ", ".join(f.what + (f" (from {f.repo})" if f.repo else "") for f in modular)
            return (f"dnf's modular filtering hides {hidden}: the enabled stream of the nvidia-driver module is "
                    "not the one these packages belong to; reset it (dnf module reset nvidia-driver) and enable the "
                    "stream of the wanted branch, or install the packages without the module")
        excluded = [f for f in self.filtered if f.by == "exclude"]
        if excluded:
            hidden = ", ".join(f.what for f in excluded)
            return f"dnf's exclude filtering hides {hidden} (an excludepkgs= or versionlock)"
        if self.no_match:
            return f"no repository offers {', '.join(self.no_match)}"
        return None


_PROBLEM = re.compile(r"^\s*Problem(?: \d+)?: (.+?)\s*$")
_PACKAGE_FILTERED = re.compile(r"package (\S+)(?: from (\S+))? is filtered out by (\w+) filtering")
_ARGUMENT_FILTERED = re.compile(r"All matches were filtered out by (\w+) filtering for argument: (\S+)")
_NO_MATCH = re.compile(r"Unable to find a match: (.+?)\s*$")


@reads_whole_lines
def parse_dnf_error(text: str) -> DnfError:
    """The problems, filtered packages and unmatched arguments of dnf's error output. Never raises."""
    problems: list[str] = []
    filtered: list[Filtered] = []
    no_match: list[str] = []
    for line in text.splitlines():
        if match := _PROBLEM.match(line):
            problems.append(match.group(1))
        if match := _PACKAGE_FILTERED.search(line):
            filtered.append(Filtered(match.group(1), match.group(3), match.group(2)))
        elif match := _ARGUMENT_FILTERED.search(line):
            filtered.append(Filtered(match.group(2), match.group(1)))
        if match := _NO_MATCH.search(line):
            no_match += match.group(1).split()
    return DnfError(tuple(problems), tuple(filtered), tuple(dict.fromkeys(no_match)))
