"""The branch catalog (`branches.yml`): what each NVIDIA driver branch is, until when it is
supported, which CUDA and GPUs it runs, and which kernel-module flavours it ships.

Everything that decides on a branch asks this module, so the rules live in one place:
`end_of_life`, `refuse_install` (an EOL branch without `allow_eol`, a GPU the branch does not
support, a flavour the GPU or branch cannot use) and `auto_flavour`.
"""
from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

Flavour = Literal["open", "proprietary"]
GRACE = "grace-"  # a device tag's prefix for a Grace superchip's GPU (grace-hopper: GH200)


def version_key(version: str) -> tuple[int, ...]:
    """580.178.04 -> (580, 178, 4): point releases compare by their numbers, not as text
    (580.95.05 is older than 580.105.08)."""
    return tuple(int(part) for part in version.split(".") if part.isdigit())


class PointRelease(BaseModel):
    """The newest point release of a branch the catalog knows, when that was learned, and where."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    learned: dt.date
    source: str


class Bulletin(BaseModel):
    """An NVIDIA security bulletin and the first fixed driver version it names, per branch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    title: str
    published: dt.date
    source: str
    fixed: dict[int, str]


class Branch(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    branch: int
    kind: Literal["long-term", "production", "new-feature"]
    eol: dt.date | None
    superseded_by: int | None = None
    cuda: int
    architectures: tuple[str, ...]
    open: bool
    proprietary: bool
    successor: int | None
    source: str
    newest: PointRelease | None = None
    proprietary_removed: str | None = None   # where NVIDIA says the branch has no proprietary modules

    def ended(self, today: dt.date) -> bool:
        """Past its end of life on `today`: its date has passed, or (a new-feature branch with
        no date) a newer branch superseded it."""
        return (self.eol is not None and today > self.eol) or (self.eol is None and self.superseded_by is not None)

    def life(self) -> str:
        if self.eol is not None:
            return f"{self.kind}, supported until {self.eol.isoformat()}"
        return f"{self.kind}, superseded by {self.superseded_by}" if self.superseded_by else self.kind


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    branches: tuple[Branch, ...]
    architectures: tuple[str, ...]
    open_from: str
    open_only: tuple[str, ...]
    devices: dict[str, str]
    bulletins: tuple[Bulletin, ...] = ()

    @model_validator(mode="after")
    def _known_generations(self) -> Catalog:
        """A device tagged with a generation the rules do not know would escape every rule."""
        unknown = sorted({g for g in self.devices.values() if g.removeprefix(GRACE) not in self.architectures})
        if unknown:
            raise ValueError(f"devices name generations not in architectures: {', '.join(unknown)}")
        return self

    def get(self, branch: int) -> Branch | None:
        return next((b for b in self.branches if b.branch == branch), None)

    def supported(self, today: dt.date) -> list[Branch]:
        return [b for b in self.branches if not b.ended(today)]


_LOADED: list[Catalog] = []
_LOADING = threading.Lock()


def catalog() -> Catalog:
    """The catalog, read once per process. Hosts run in threads that all ask at once: without the
    lock each of them parsed the file itself (functools.cache does not wait for a call in flight),
    which was a quarter of a 20-host check's CPU. libyaml parses it when it is there."""
    if not _LOADED:
        with _LOADING:
            if not _LOADED:
                text = resources.files("gpuconf.driver").joinpath("branches.yml").read_text()
                loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
                _LOADED.append(Catalog.model_validate(yaml.load(text, Loader=loader)))
    return _LOADED[0]


@dataclass(frozen=True)
class Gpu:
    """A GPU on the PCI bus, with its generation when the catalog knows its device id."""

    pci_address: str
    device_id: str
    architecture: str | None   # a generation of `Catalog.architectures`, or None
    grace: bool = False        # a Grace superchip's GPU (GH200, GB200): open modules only

    @property
    def label(self) -> str:
        kind = ("Grace " if self.grace else "") + (self.architecture or "unknown generation")
        return f"GPU {self.pci_address} ({self.device_id}, {kind})"


def gpus(host_gpus: object) -> list[Gpu]:
    """The host fact `gpus` (sysfs: address and device id) with each GPU's generation."""
    found = []
    for gpu in host_gpus if isinstance(host_gpus, list) else []:
        if not isinstance(gpu, dict):
            continue
        device = str(gpu.get("device_id", "")).lower()
        generation = catalog().devices.get(device)
        grace = bool(generation and generation.startswith(GRACE))
        found.append(Gpu(str(gpu.get("pci_address", "?")), device,
                         generation.removeprefix(GRACE) if generation else None, grace))
    return found


def _older(arch: str, than: str) -> bool:
    order = catalog().architectures
    return order.index(arch) < order.index(than)


def open_only(gpu: Gpu) -> bool:
    return gpu.grace or gpu.architecture in catalog().open_only


def auto_flavour(branch: Branch, host_gpus: list[Gpu]) -> Flavour:
    """What `nvidia_driver_flavour: auto` means: open where the branch has it and every GPU
    can run it (Turing or newer: NVIDIA's default since 560), proprietary otherwise."""
    known = [g for g in host_gpus if g.architecture]
    if not branch.proprietary:
        return "open"
    if any(_older(g.architecture or "", catalog().open_from) for g in known):
        return "proprietary"
    if any(open_only(g) for g in host_gpus) or branch.branch >= 560:
        return "open"
    return "proprietary"


def flavour_refusal(branch: Branch, flavour: Flavour, host_gpus: list[Gpu]) -> str | None:
    """Why `flavour` cannot run on this host with this branch, or None."""
    if flavour == "open" and not branch.open:
        return f"branch {branch.branch} ships no open kernel modules"
    if flavour == "proprietary" and not branch.proprietary:
        where = f" ({branch.proprietary_removed})" if branch.proprietary_removed else ""
        return (f"branch {branch.branch} ships no proprietary kernel modules{where}: "
                "use nvidia_driver_flavour: open")
    for gpu in host_gpus:
        if flavour == "proprietary" and open_only(gpu):
            return f"{gpu.label} supports only the open kernel modules: use nvidia_driver_flavour: open (or auto)"
        if flavour == "open" and gpu.architecture and _older(gpu.architecture, catalog().open_from):
            return (f"{gpu.label} is older than Turing and has no GSP, which the open kernel modules need: "
                    "use nvidia_driver_flavour: proprietary (or auto)")
    return None


def move_to(branch: Branch, today: dt.date, host_gpus: list[Gpu]) -> Branch | None:
    """The supported branch to move to from `branch`: its successor where that still runs these
    GPUs, else the newest long-term branch that does."""
    candidates = []
    successor = catalog().get(branch.successor) if branch.successor else None
    if successor:
        candidates.append(successor)
    candidates += sorted((b for b in catalog().branches if b.kind == "long-term"), key=lambda b: -b.branch)
    for candidate in candidates:
        if not candidate.ended(today) and not unsupported_gpus(candidate, host_gpus):
            return candidate
    return None


def unsupported_gpus(branch: Branch, host_gpus: list[Gpu]) -> list[Gpu]:
    return [g for g in host_gpus if g.architecture and g.architecture not in branch.architectures]


def end_of_life(branch: Branch, today: dt.date, host_gpus: list[Gpu]) -> str | None:
    """The warning for a branch past its end of life, naming the branch to move to."""
    if not branch.ended(today):
        return None
    when = f"on {branch.eol.isoformat()}" if branch.eol else f"when {branch.superseded_by} superseded it"
    target = move_to(branch, today, host_gpus)
    advice = (f"move to {target.branch} ({target.life()})" if target else
              "no supported branch runs these GPUs")
    return f"driver branch {branch.branch} reached its end of life {when}: {advice}"


def refuse_install(branch_number: int, version: str, flavour: Flavour, today: dt.date, host_gpus: list[Gpu],
                   allow_eol: bool) -> str | None:
    """Why installing this branch at this version is refused, or None."""
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) != branch_number:
        return (f"version {version} is not of branch {branch_number}: nvidia_driver_branch and "
                "nvidia_driver_version disagree")
    branch = catalog().get(branch_number)
    if branch is None:
        known = ", ".join(str(b.branch) for b in catalog().branches)
        return f"branch {branch_number} is not in the branch catalog (known: {known})"
    unsupported = unsupported_gpus(branch, host_gpus)
    if unsupported:
        target = move_to(branch, today, host_gpus)
        return (f"branch {branch_number} does not support {unsupported[0].label}" +
                (f": use {target.branch}" if target else ""))
    eol = end_of_life(branch, today, host_gpus)
    if eol and not allow_eol:
        return f"{eol}; set nvidia_driver_allow_eol: true to install it anyway"
    return flavour_refusal(branch, flavour, host_gpus)


def point_release_behind(branch: Branch, installed: str) -> str | None:
    """The warning for a node on an older point release than the newest its branch is known
    to have, naming the newest (and when that was learned), and the security bulletin whose
    fix the node lacks, where one names this branch."""
    newest = branch.newest
    if newest is None or not installed.split(".")[0].isdigit() or int(installed.split(".")[0]) != branch.branch:
        return None
    if version_key(installed) >= version_key(newest.version):
        return None
    message = (f"driver {installed} is behind the newest point release of branch {branch.branch}, "
               f"{newest.version} (known since {newest.learned.isoformat()}: {newest.source})")
    missed = [b for b in catalog().bulletins
              if b.fixed.get(branch.branch) and version_key(installed) < version_key(b.fixed[branch.branch])]
    if missed:
        named = "; ".join(f"{b.title} (bulletin {b.id}, {b.source}) fixes it in {b.fixed[branch.branch]}"
                          for b in missed)
        message += f"; security: {named}"
    return message
