"""``dkms status`` in every format seen in the wild.

Why it matters: after a kernel upgrade the nvidia module is ``installed`` for the old
kernel only; the ``nvidia_driver`` role compares the running kernel with these entries
and runs ``dkms autoinstall`` when it is missing.

Formats::

    nvidia, 410.78, 4.15.0-74-generic, x86_64: installed                 (dkms 2.x)
    nvidia/535.104.05, 6.1.0-18-amd64, x86_64: installed                 (dkms 3.x)
    8812au/4.2.3: added                                                  (no kernel yet)
    nvidia, 535.104.05: added                                            (2.x, no kernel)
    i915-sriov-dkms/2025.03.26, 6.11.11-2-pve, x86_64: installed (WARNING! Diff between built and installed module!)

The state is ``added``, ``built``, ``installed`` (or ``installed-weak`` on RHEL); a
parenthesised suffix is kept as ``warning``. Error lines (``Error! ...``) are returned
in ``problems``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpuconf.facts.common import reads_whole_lines


@dataclass(frozen=True)
class DkmsEntry:
    """One module/version[/kernel/arch] line of ``dkms status``."""

    module: str
    version: str
    kernel: str | None
    arch: str | None
    state: str
    warning: str | None = None


@dataclass(frozen=True)
class DkmsStatus:
    """All entries; ``problems`` holds lines that are not entries (errors, noise)."""

    entries: tuple[DkmsEntry, ...]
    problems: tuple[str, ...] = ()
    incomplete: str = ""  # why the output was cut short ("" when whole): gpuconf.facts.common

    def for_module(self, module: str) -> tuple[DkmsEntry, ...]:
        """Entries of one module (``nvidia``; packaging may also name it ``nvidia-331``)."""
        return tuple(entry for entry in self.entries if entry.module == module)

    def installed_for(self, module: str, kernel: str) -> tuple[DkmsEntry, ...]:
        """Entries of ``module`` in state ``installed`` (or ``installed-weak``) for ``kernel``."""
        return tuple(
            entry
            for entry in self.for_module(module)
            if entry.kernel == kernel and entry.state.startswith("installed")
        )


_LINE = re.compile(r"^(?P<fields>[^:]+?):\s*(?P<state>[\w-]+)\s*(?:\((?P<warning>.*)\))?\s*$")


@reads_whole_lines
def parse_dkms_status(text: str) -> DkmsStatus:
    """Parse ``dkms status [-m MODULE]`` output (v2 comma or v3 slash format)."""
    entries: list[DkmsEntry] = []
    problems: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = _LINE.match(line)
        if not match or line.lower().startswith(("error", "warning", "deprecated")):
            problems.append(line)
            continue
        fields = [part.strip() for part in match.group("fields").split(",")]
        if "/" in fields[0]:  # dkms 3: "module/version, kernel, arch"
            module, _, version = fields[0].partition("/")
            rest = fields[1:]
        elif len(fields) >= 2:  # dkms 2: "module, version, kernel, arch"
            module, version, rest = fields[0], fields[1], fields[2:]
        else:
            problems.append(line)
            continue
        entries.append(
            DkmsEntry(
                module=module,
                version=version,
                kernel=rest[0] if len(rest) > 0 else None,
                arch=rest[1] if len(rest) > 1 else None,
                state=match.group("state"),
                warning=match.group("warning"),
            )
        )
    return DkmsStatus(tuple(entries), tuple(problems))
