"""NVIDIA's published release data, read to refresh the branch catalog's newest point releases.

NVIDIA publishes one manifest per data-center driver release,
developer.download.nvidia.com/compute/nvidia-driver/redist/redistrib_<version>.json, with the
release's date (`release_date`) and its version (`release_label`; manifests before 2023 name it
only in each component's `version`). The directory's index page lists every manifest. Either
can be read here: `gpuconf catalog --from-redistrib FILE...` proposes the catalog rows to update.
"""
from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass

from gpuconf.driver.catalog import Catalog, version_key
from gpuconf.errors import UsageError

# a manifest's name, and the date listed after it before the next name (an HTML index names each
# manifest twice, in the link and its text: the date follows the second)
INDEX_ROW = re.compile(r"redistrib_(\d{3}\.\d+(?:\.\d+)?)\.json(?:(?:(?!redistrib_).){0,80}?(\d{4}-\d{2}-\d{2}))?",
                       re.DOTALL)


@dataclass(frozen=True)
class Release:
    """One published driver release: its version and, where the data says it, its date."""

    version: str
    date: dt.date | None
    where: str

    @property
    def branch(self) -> int:
        return version_key(self.version)[0]


def parse_manifest(text: str, where: str) -> Release:
    """A redistrib_<version>.json manifest."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not a redistrib JSON manifest ({exc.msg} at line {exc.lineno}); "
                         "it may be cut short: download it again") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a redistrib JSON manifest (no object at the top)")
    driver = data.get("nvidia_driver")
    version = data.get("release_label") or (driver.get("version") if isinstance(driver, dict) else None)
    if not isinstance(version, str) or not re.fullmatch(r"\d{3}\.\d+(\.\d+)?", version):
        raise UsageError(f"{where}: no driver version in it (release_label, or nvidia_driver.version)")
    return Release(version, _date(data.get("release_date"), where), where)


def parse_index(text: str, where: str) -> list[Release]:
    """The redist directory's index page (HTML or its text): every manifest it lists, with the
    date beside it (the upload day, which the manifest's release_date may precede)."""
    dates: dict[str, dt.date | None] = {}
    for match in INDEX_ROW.finditer(text):
        dates[match[1]] = dates.get(match[1]) or _date(match[2], where)
    releases = [Release(version, date, where) for version, date in dates.items()]
    if not releases:
        raise UsageError(f"{where}: lists no redistrib_<version>.json: not NVIDIA's redist index page")
    return releases


def read(text: str, where: str) -> list[Release]:
    """A manifest or an index page, whichever the text is."""
    return [parse_manifest(text, where)] if text.lstrip().startswith("{") else parse_index(text, where)


def _date(value: object, where: str) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise UsageError(f"{where}: release_date '{value}' is not a date like 2026-11-23") from None


def proposals(catalog: Catalog, releases: list[Release]) -> list[str]:
    """One line per catalog branch whose newest known point release the data shows is older, and
    one per branch of the data that the catalog has no row for (left to the person: a new branch
    needs its kind, end of life and flavours from NVIDIA's support matrix, not a manifest)."""
    known_branches = {row.branch for row in catalog.branches}
    lines = [f"branch {b}: not in the catalog ({', '.join(sorted({r.version for r in releases if r.branch == b}))}); "
             "a new branch needs a row from NVIDIA's support matrix"
             for b in sorted({r.branch for r in releases} - known_branches)]
    for row in catalog.branches:
        mine = [r for r in releases if r.branch == row.branch]
        if not mine:
            continue
        best = max(mine, key=lambda r: version_key(r.version))
        known = row.newest.version if row.newest else None
        if known is not None and version_key(best.version) <= version_key(known):
            continue
        when = f", released {best.date.isoformat()}" if best.date else ""
        lines.append(f"branch {row.branch}: newest {known or 'unknown'} -> {best.version}{when} ({best.where}); "
                     f'set in branches.yml: newest: {{version: "{best.version}", learned: <today>, '
                     f'source: "redist ({best.where})"}}')
    return lines
