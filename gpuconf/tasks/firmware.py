"""Firmware as declared state: the bundle a GPU model's nodes should run, read from each node's
BMC over Redfish, and the staged update that brings a node to it.

check() compares the BMC's inventory with the bundle: a component behind is an update, one ahead
is a downgrade (done only with `allow_downgrade`), one the BMC does not list refuses the bundle
(it was made for another system, as nvfwupd refuses a package whose inventory is missing), and a
family whose members run different versions on the node is named. Every package's SHA-256 and
signature are checked on the controller while the parameters resolve, so a bundle that does not
verify is refused before anything is sent, in check mode too.

apply() goes in the seed's order: back up the inventory and the BIOS attributes (a tarball beside
the node's evidence bundles), update the BMC and wait for its Task and for the BMC to answer again
at its new version, then the baseboard's packages, then the power cycle that activates them
(through the BMC, waiting for the node's new boot), then verify every version. A step that fails
stops the node with the Task's messages (`gpuconf remediate` holds it for a person).
"""
from __future__ import annotations

import datetime
import io
import json
import os
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field

from gpuconf.bmc.bundle import PackageCheck, check_package
from gpuconf.bmc.client import BmcEndpoint, BmcError, ReadOnly, Session
from gpuconf.bmc.read import inventory_fact, read_payloads
from gpuconf.bmc.update import UpdateFailed, Updater
from gpuconf.errors import TaskError
from gpuconf.facts.base import Fact
from gpuconf.facts.firmware import compare_versions, compress_names, describe_mixed, mixed_families
from gpuconf.facts.redfish import BmcInventory
from gpuconf.files.state import bundles_dir
from gpuconf.files.values import JSONValue
from gpuconf.tasks.base import ApplyContext, Change, Facts, Params, Refused, Resolver, TaskType, Verdict, drift, in_sync

BMC_COMPONENTS = ["HGX_FW_BMC_0", "HostBMC_0", "FW_BMC_0", "BMC"]


class FirmwarePackage(Params):
    """One package file of the bundle (on the controller) and the components it updates;
    `image_uri`, where the BMC can fetch the same file itself (the site's HTTP(S) server), makes
    the update a Redfish SimpleUpdate instead of a push of the file."""

    file: str
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    signature: str
    components: list[str] = Field(min_length=1)
    image_uri: str | None = Field(None, pattern=r"^(https?|sftp|scp|tftp|nfs|cifs)://")


class FirmwareParams(Params):
    bmc_address: str
    bmc_user: str = ""
    bmc_password: str = ""
    bmc_ca_file: str | None = None
    bmc_timeout: float = Field(20.0, gt=0)
    bundle: str = "bundle"
    components: dict[str, str] = Field(min_length=1)   # component -> the version wanted
    packages: list[FirmwarePackage] = Field(min_length=1)
    public_key: str
    allow_downgrade: bool = False
    bmc_components: list[str] = Field(default_factory=lambda: list(BMC_COMPONENTS))
    task_timeout: float = Field(1800.0, gt=0)
    bmc_return_timeout: float = Field(900.0, gt=0)
    power_cycle_timeout: float = Field(900.0, gt=0)
    backup_dir: str = ""
    # set by resolve() on the controller, whatever a playbook says: file -> why it may not be sent
    package_problems: dict[str, str | None] = Field(default_factory=dict)

    @property
    def endpoint(self) -> BmcEndpoint:
        endpoint = BmcEndpoint.from_vars("", {"bmc_address": self.bmc_address, "bmc_user": self.bmc_user,
                                              "bmc_password": self.bmc_password, "bmc_ca_file": self.bmc_ca_file,
                                              "bmc_timeout": self.bmc_timeout})
        assert endpoint is not None
        return endpoint


@dataclass(frozen=True)
class Step:
    """What one change of the plan does, for apply(): `kind` backup, bmc, baseboard, activate."""

    kind: Literal["backup", "bmc", "baseboard", "activate"]
    package: FirmwarePackage | None = None
    targets: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)


_CHECKED: dict[tuple[str, int, int, str, str, str], PackageCheck] = {}


def _checked(package: Mapping[str, object], public_key: str) -> PackageCheck:
    """A package's check, done once per file state and key in this process (a fleet's hosts share it)."""
    path = Path(str(package.get("file", "")))
    try:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns, str(package.get("sha256", "")),
               str(package.get("signature", "")), public_key)
    except OSError:
        return check_package(str(path), str(package.get("sha256", "")), str(package.get("signature", "")), public_key)
    if key not in _CHECKED:
        _CHECKED[key] = check_package(str(path), str(package.get("sha256", "")), str(package.get("signature", "")),
                                      public_key)
    return _CHECKED[key]


class Firmware(TaskType[FirmwareParams]):
    """A node's firmware at a bundle's versions, read from its BMC over Redfish (`bmc_address`,
    credentials from the inventory or a vault, the CA that signs the BMC's certificate). Packages
    are verified (SHA-256, Ed25519 or RSA signature with `public_key`) before anything is sent;
    apply backs up the inventory and BIOS attributes, updates the BMC first (its Task, then the BMC
    back at the new version), then the baseboard, power-cycles to activate and verifies every
    version. A downgrade is done only with `allow_downgrade`."""

    name = "firmware"
    Params = FirmwareParams
    reboots = True

    def resolve(self, values: dict[str, object], resolver: Resolver) -> dict[str, object]:
        packages = values.get("packages")
        key = str(values.get("public_key", ""))
        problems: dict[str, str | None] = {}
        if isinstance(packages, list):
            for package in packages:
                if isinstance(package, dict) and package.get("file"):
                    problems[str(package["file"])] = _checked(package, key).problem
        return {**values, "package_problems": problems}

    def reads(self, params: FirmwareParams) -> list[Fact]:
        if any(params.package_problems.values()):
            return []   # refused in check(): the BMC is not even read
        return [inventory_fact(params.endpoint)]

    def check(self, params: FirmwareParams, facts: Facts) -> Verdict:
        refused = [problem for problem in params.package_problems.values() if problem]
        if refused:
            raise Refused(f"bundle {params.bundle} refused before anything is sent: " + "; ".join(refused))
        found: BmcInventory = facts[inventory_fact(params.endpoint)]
        return plan(params, found)

    def apply(self, ctx: ApplyContext, params: FirmwareParams, changes: list[Change]) -> dict[str, object] | None:
        log: list[str] = []
        steps = [c.after for c in changes if isinstance(c.after, Step)]
        session = Session(params.endpoint)
        updater = Updater(session, log.append)
        backup: str | None = None
        current: Step | None = None   # the step under way once something was sent to the BMC

        def stopped(message: str, brief: str) -> TaskError:
            """Before anything was sent, the remediation fails; after, the node is the hardware's
            (`hold`, the BMC's own words: gpuconf/remediate/firmware.py holds it)."""
            data: dict[str, object] = {"task_log": log, "backup": backup, "stdout": "\n".join(log)}
            if current is not None:
                what = compress_names(list(current.targets)) if current.targets else "the power cycle"
                data["hold"] = f"{what}: {brief}"
            return TaskError(message, data=data)

        try:
            for step in steps:
                if step.kind == "backup":
                    where = Path(params.backup_dir) if params.backup_dir else bundles_dir()
                    backup = str(write_backup(where, ctx.host, read_payloads(ReadOnly(session))))
                    log.append(f"backup: {backup}")
                elif step.package is not None:
                    current = step
                    task = updater.push(Path(step.package.file), list(step.targets), step.package.image_uri)
                    updater.follow(task, params.task_timeout)
                    if step.kind == "bmc":
                        for name in step.targets:
                            updater.wait_version(name, step.versions[name], params.bmc_return_timeout)
                elif step.kind == "activate":
                    current = step
                    ctx.reboot("", params.power_cycle_timeout, via=updater.power_cycle)
        except UpdateFailed as exc:
            raise stopped(f"firmware update stopped: {exc}", exc.brief) from None
        except BmcError as exc:
            raise stopped(f"firmware update stopped: {exc}", str(exc)) from None
        except OSError as exc:   # this machine's: the backup could not be written
            raise stopped(f"firmware update stopped: {exc}", str(exc)) from None
        finally:
            session.close()
        after = ctx.read(inventory_fact(params.endpoint))   # the re-check reads this, the BMC's own word
        wrong = [f"{name} at {after.version(name)}, not {version}" for name, version in params.components.items()
                 if after.version(name) != version and not _kept_ahead(params, after, name)]
        if wrong:
            current = current or Step("activate")
            raise stopped("firmware update did not verify: " + "; ".join(wrong),
                          "not at the bundle's version after the update: " + compress_names(
                              [w.split(" at ", 1)[0] for w in wrong]))
        return {"task_log": log, "backup": backup, "stdout": "\n".join(log)}


def _kept_ahead(params: FirmwareParams, found: BmcInventory, name: str) -> bool:
    installed = found.version(name)
    return installed is not None and not params.allow_downgrade and \
        compare_versions(installed, params.components[name]) > 0


def plan(params: FirmwareParams, found: BmcInventory) -> Verdict:
    """The changes that bring the node to the bundle, in the order apply takes them."""
    missing = [name for name in params.components if found.version(name) is None]
    if missing:
        raise Refused(f"bundle {params.bundle} does not fit this node: the BMC lists no {compress_names(missing)}"
                      + (f" ({'; '.join(found.problems)})" if found.problems else ""))
    behind: dict[str, str] = {}
    ahead: dict[str, str] = {}
    kept: dict[str, str] = {}
    for name, wanted in params.components.items():
        order = compare_versions(str(found.version(name)), wanted)
        if order < 0:
            behind[name] = wanted
        elif order > 0:
            (ahead if params.allow_downgrade else kept)[name] = wanted
    mixed = [describe_mixed(family, versions) for family, versions in mixed_families(list(found.components)).items()]
    to_change = {**behind, **ahead}
    changes: list[Change] = []
    if to_change:
        covered = {name for package in params.packages for name in package.components}
        uncovered = sorted(set(to_change) - covered)
        if uncovered:
            raise Refused(f"bundle {params.bundle}: no package updates {compress_names(uncovered)}")
        changes.append(Change("back up the BMC's firmware inventory and BIOS attributes", after=Step("backup")))
        bmc_first = sorted(params.packages, key=lambda p: not set(p.components) & set(params.bmc_components))
        baseboard = False
        for package in bmc_first:
            targets = [name for name in package.components if name in to_change]
            if not targets:
                continue
            is_bmc = bool(set(targets) & set(params.bmc_components))
            baseboard = baseboard or not is_bmc
            moves = _moves(targets, found, to_change)
            where = "the BMC first, then wait for its Task and for the BMC to answer at the new version" if is_bmc \
                else "the GPU baseboard"
            changes.append(Change(f"update {moves} from {Path(package.file).name} ({where})",
                                  before={n: found.version(n) for n in targets}, after=Step(
                                      "bmc" if is_bmc else "baseboard", package, tuple(targets),
                                      {n: to_change[n] for n in targets})))
        if baseboard:
            changes.append(Change("power-cycle the system through the BMC to activate the baseboard's images, "
                                  "then verify every version", after=Step("activate")))
    for name, wanted in kept.items():
        changes.append(Change(f"{name} is at {found.version(name)}, ahead of the bundle's {wanted}: not downgraded "
                              "(allow_downgrade is false)"))
    data = {"components": {c.name: c.version for c in found.components}, "mixed": mixed}
    if changes:
        return drift(*changes, **data, message="; ".join([c.summary for c in changes] + mixed))
    return in_sync(f"bundle {params.bundle}: {len(params.components)} components at their versions"
                   + ("; " + "; ".join(mixed) if mixed else ""), **data)


def _moves(targets: list[str], found: BmcInventory, wanted: dict[str, str]) -> str:
    """`HGX_FW_GPU_SXM_[1-8] 96.00.74.00.0D -> 96.00.89.00.01`, grouped by (installed, wanted)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name in targets:
        groups.setdefault((str(found.version(name)), wanted[name]), []).append(name)
    return "; ".join(f"{compress_names(names)} {old} -> {new}" for (old, new), names in groups.items())


def write_backup(directory: Path, host: str, payloads: Mapping[str, JSONValue],
                 now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)) -> Path:
    """The BMC's payloads (inventory, members, update service, BIOS attributes) as
    `<host>-<UTC>-firmware.tar.gz`, written whole under a temporary name and then renamed."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{host}-{now().strftime('%Y%m%dT%H%M%SZ')}-firmware.tar.gz"
    part = directory / f".{name}.part"
    with tarfile.open(part, "w:gz") as tar:
        for member, content in (("firmware-inventory.json", {p: v for p, v in payloads.items() if "/Bios" not in p}),
                                ("bios-attributes.json", {p: v for p, v in payloads.items() if p.endswith("/Bios")})):
            data = json.dumps(content, indent=2, sort_keys=True).encode()
            info = tarfile.TarInfo(f"firmware/{member}")
            info.size, info.mtime, info.mode = len(data), int(now().timestamp()), 0o600
            tar.addfile(info, io.BytesIO(data))
    with part.open("rb") as handle:
        os.fsync(handle.fileno())
    os.chmod(part, 0o600)
    final = directory / name
    os.replace(part, final)
    return final
