"""Packages through apt or dnf, the host platform's, read from one listing per host."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from gpuconf.errors import TaskError
from gpuconf.facts.base import Fact
from gpuconf.facts.dnf import parse_dnf_error
from gpuconf.facts.installed import INSTALLED, Installed, PackageSet, Unfinished, package_set
from gpuconf.facts.packages import parse_apt_mark
from gpuconf.tasks.base import ApplyContext, Change, Facts, Op, P, Params, TaskType, Verdict, drift, in_sync, run

PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.\-]*$")
# apt's words when DPkg::Lock::Timeout runs out: "Could not get lock /var/lib/dpkg/lock-frontend.
# It is held by process 1234 (unattended-upgr)"
LOCK_HELD = re.compile(r"Could not get lock (?P<path>\S+?)\.?\s+It is held by process (?P<pid>\d+)"
                       r"(?: \((?P<name>[^)]*)\))?")
DPKG_LOCKED = re.compile(r"lock was locked by another process with pid (?P<pid>\d+)")
LOCK_FAILED = re.compile(r"Could not get lock|Unable to acquire the dpkg")


def _installed(package: Installed | None) -> bool:
    return package is not None and package.installed


def _config_only(package: Installed | None) -> bool:
    return package is not None and package.status == "config-files"


def _held(package: Installed | None) -> bool:
    return package is not None and package.held


@dataclass(frozen=True)
class Transaction:
    """One install and removal of the package manager, as data: what consecutive tasks' ops join
    into one transaction from (`join_ops`)."""

    backend: Literal["apt", "dnf"]
    install: tuple[str, ...] = ()  # specs: `name`, `name=version` (apt), `name-version` (dnf)
    remove: tuple[str, ...] = ()
    purge: bool = False
    allow_held: bool = False
    lock_timeout: float = 120.0


@dataclass(frozen=True)
class PackageOp(Op):
    """A package manager's op and what apply_ops checks of its answer, kept here (never sent to
    the host): the names apt-mark must report held, and how long the program waits for the
    dpkg lock when that is not the task's `lock_timeout` (0: dpkg itself does not wait); the
    transaction it runs, or that it finishes an interrupted one (`repair`), for `join_ops`."""

    marks: tuple[str, ...] = ()
    lock_wait: float | None = None
    transaction: Transaction | None = None
    repair: bool = False


def apply_ops(ctx: ApplyContext, ops: list[Op], lock_timeout: float) -> None:
    """The ops in one round trip, in order (install before hold): a failure stops the rest on
    the host, and a held dpkg lock is told apart from any other failure (apt names the holder
    on stdout)."""
    for op, output in zip(ops, ctx.execute(ops, explains_failures=True)):
        marks = op.marks if isinstance(op, PackageOp) else ()
        if output.rc == 0:
            if marks:  # apt-mark hold: every name must be reported held
                marked = parse_apt_mark(output.stdout)
                missed = set(marks) - set(marked.held) - set(marked.already_held)
                if missed:
                    raise TaskError(f"{op.description}: apt-mark did not hold {', '.join(sorted(missed))}: "
                                    f"{'; '.join(marked.problems) or output.stdout.strip()[-300:]}")
            continue
        waited = op.lock_wait if isinstance(op, PackageOp) and op.lock_wait is not None else lock_timeout
        plain = lock_error(output.stdout + "\n" + output.stderr, waited) or \
            parse_dnf_error(output.stdout + "\n" + output.stderr).cause()   # dnf's modular filtering, ...
        tail = (output.stderr.strip() or output.stdout.strip())[-800:]
        raise TaskError(plain or f"{op.description} failed (exit {output.rc}): {tail}")


def join_transactions(works: list[Transaction]) -> Transaction | None:
    """One transaction doing what `works` do, or None where they cannot be one: another backend, a
    package one installs and another removes, removals both purged and not (apt's `--purge` is
    the whole transaction's). Held packages may change if any of them allowed it; the longest
    lock wait is the one's."""
    if not works or len({w.backend for w in works}) > 1:
        return None
    install = tuple(dict.fromkeys(s for w in works for s in w.install))
    remove = tuple(dict.fromkeys(n for w in works for n in w.remove))
    backend = works[0].backend
    names = [(DnfBackend if backend == "dnf" else AptBackend).split(spec) for spec in install]
    if len(set(names)) < len(names) or any(n == r or n.startswith(r + "-") for n in names for r in remove):
        return None  # one package wanted at two versions, or installed and removed
    if backend == "apt" and len({w.purge for w in works if w.remove}) > 1:
        return None
    return Transaction(backend, install, remove, any(w.purge for w in works if w.remove),
                       any(w.allow_held for w in works), max(w.lock_timeout for w in works))


def join_ops(parts: list[list[Op]]) -> list[Op] | None:
    """Several package tasks' ops as one list with one transaction: the repair of an interrupted
    dpkg or rpm once, each task's ops before its transaction (an unlock), the joined transaction,
    then each task's ops after it (the holds), in task order. None where they cannot join (a task
    with two transactions, or transactions that cannot be one)."""
    repairs: list[Op] = []
    before: list[Op] = []
    after: list[Op] = []
    works: list[Transaction] = []
    for ops in parts:
        if not ops:
            return None
        ahead = [op for op in ops if isinstance(op, PackageOp) and op.transaction is not None]
        if len(ahead) > 1:
            return None
        passed = not ahead
        for op in ops:
            if isinstance(op, PackageOp) and op.repair:
                if all(op.request != r.request for r in repairs):
                    repairs.append(op)
            elif isinstance(op, PackageOp) and op.transaction is not None:
                works.append(op.transaction)
                passed = True
            else:
                (after if passed else before).append(op)
    if not works:
        return repairs + before + after
    joined = join_transactions(works)
    if joined is None:
        return None
    backend: Backend = DnfBackend() if joined.backend == "dnf" else AptBackend()
    return repairs + before + [backend.transaction(joined)] + after


class JoinsTransactions(TaskType[P]):
    """A task type whose changes are package transactions: consecutive tasks of such types send
    theirs to the package manager as one (the engine's joint apply, gpuconf/engine/joint.py)."""

    batch: ClassVar[str] = "package"

    def batch_ops(self, params: P, changes: list[Change]) -> list[Op] | None:
        ops = [op for change in changes for op in change.ops]
        return ops if join_ops([ops]) is not None else None

    def join(self, parts: list[list[Op]]) -> list[Op] | None:
        return join_ops(parts)

    def apply_joined(self, ctx: ApplyContext, ops: list[Op]) -> None:
        waits = [op.transaction.lock_timeout for op in ops if isinstance(op, PackageOp) and op.transaction]
        apply_ops(ctx, ops, max(waits, default=AptBackend.LOCK_TIMEOUT))


def version_matches(installed: str | None, wanted: str) -> bool:
    """An installed package version is the wanted one: the same, or the same but for an epoch
    (`3:580.95.05-1.el9`) or a dist tag (`12.8.1-1.el9`) that rpm adds and the playbook left out."""
    if installed is None:
        return False
    plain = installed.split(":", 1)[-1] if ":" not in wanted else installed
    return installed == wanted or plain == wanted or plain.startswith(wanted + ".el")


class AptBackend:
    """What `package` and the driver stack need from apt. Every apt call waits up to
    `lock_timeout` seconds for the dpkg lock (apt's DPkg::Lock::Timeout)."""

    LOCK_TIMEOUT = 120.0

    @staticmethod
    def spec(name: str, version: str | None) -> str:
        return f"{name}={version}" if version else name

    @staticmethod
    def split(spec: str) -> str:
        """The package's name in a spec."""
        return spec.split("=", 1)[0]

    def _apt(self, verb: str, args: list[str], allow_held: bool, lock_timeout: float, purge: bool = False,
             reinstall: bool = False) -> str:
        options = ["-y", "-q", *(["--purge"] if purge else []), *(["--reinstall"] if reinstall else []),
                   "-o", f"DPkg::Lock::Timeout={lock_timeout:.0f}",
                   "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
        if verb == "install":
            options.append("--allow-downgrades")
        if allow_held:
            options.append("--allow-change-held-packages")
        return "DEBIAN_FRONTEND=noninteractive apt-get " + shlex.join([verb, *options, "--", *args])

    def install(self, specs: list[str], allow_held: bool, lock_timeout: float = LOCK_TIMEOUT,
                purge: tuple[str, ...] = ()) -> Op:
        """One apt transaction: install `specs` and purge `purge` together (`name-`), so that a
        failure (a missing version, a conflict) leaves everything as it was."""
        return self.transaction(Transaction("apt", tuple(specs), purge, bool(purge), allow_held, lock_timeout))

    def remove(self, names: list[str], purge: bool, allow_held: bool, lock_timeout: float = LOCK_TIMEOUT) -> Op:
        return self.transaction(Transaction("apt", (), tuple(names), purge, allow_held, lock_timeout))

    def transaction(self, work: Transaction) -> Op:
        """The one apt-get that carries `work` out: removals ride on an install as `name-`."""
        if work.install:
            args = [*work.install, *(f"{name}-" for name in work.remove)]
            command = self._apt("install", args, work.allow_held, work.lock_timeout,
                                purge=work.purge and bool(work.remove))
        else:
            command = self._apt("purge" if work.purge else "remove", list(work.remove), work.allow_held,
                                work.lock_timeout)
        op = run(command, timeout=1800 + work.lock_timeout)
        return PackageOp(op.request, op.description, transaction=work)

    def repair(self, unfinished: tuple[Unfinished, ...], lock_timeout: float = LOCK_TIMEOUT) -> list[Op]:
        """Finish what an interrupted dpkg left: configure every half-way package (and merge its
        journal), then reinstall those that configuring cannot finish. dpkg does not wait for
        its lock: a held lock fails at once (`lock_wait` 0 tells apply_ops so)."""
        configure = run("DEBIAN_FRONTEND=noninteractive dpkg --configure -a --force-confdef --force-confold",
                        timeout=1800, description="run: dpkg --configure -a")
        ops: list[Op] = [PackageOp(configure.request, configure.description, lock_wait=0, repair=True)]
        again = [u.name for u in unfinished if u.reinstall]
        if again:
            op = run(self._apt("install", again, True, lock_timeout, reinstall=True), timeout=1800 + lock_timeout,
                     description=f"run: apt-get install --reinstall {' '.join(again)}")
            ops.append(PackageOp(op.request, op.description, repair=True))
        return ops

    def hold(self, names: list[str], hold: bool, versions: dict[str, str] | None = None) -> Op:
        # dpkg --set-selections under apt-mark does not wait for the lock: it fails at once, naming the holder
        op = run(["apt-mark", "hold" if hold else "unhold", *names], timeout=120)
        return PackageOp(op.request, op.description, marks=tuple(names)) if hold else op


class DnfBackend:
    """The same for dnf (RHEL, Rocky, Alma 8/9): exact versions as `name-[epoch:]version`,
    holds as versionlock entries (dnf-plugins-core's versionlock plugin)."""

    LOCK_TIMEOUT = AptBackend.LOCK_TIMEOUT

    @staticmethod
    def spec(name: str, version: str | None) -> str:
        return f"{name}-{version}" if version else name

    @staticmethod
    def split(spec: str) -> str:
        """The package's name in a spec, as far as it can be told: `name-version` is ambiguous
        (`datacenter-gpu-manager-4-core` is a name), so the spec whole."""
        return spec

    def install(self, specs: list[str], allow_held: bool, lock_timeout: float = LOCK_TIMEOUT,
                purge: tuple[str, ...] = ()) -> Op:
        """One dnf transaction (`dnf shell`): remove `purge` and install `specs` together."""
        return self.transaction(Transaction("dnf", tuple(specs), purge, bool(purge), allow_held, lock_timeout))

    def remove(self, names: list[str], purge: bool, allow_held: bool, lock_timeout: float = LOCK_TIMEOUT) -> Op:
        return self.transaction(Transaction("dnf", (), tuple(names), purge, allow_held, lock_timeout))

    def transaction(self, work: Transaction) -> Op:
        """The one dnf that carries `work` out: `dnf shell` when it both removes and installs."""
        timeout = 1800 + work.lock_timeout
        if not work.install:
            op = run(["dnf", "-y", "-q", "remove", "--", *work.remove], timeout=timeout)
        elif not work.remove:
            op = run(["dnf", "-y", "-q", "install", "--allowerasing", "--", *work.install], timeout=timeout)
        else:
            script = "".join(f"remove {shlex.quote(name)}\n" for name in work.remove)
            script += f"install {' '.join(shlex.quote(s) for s in work.install)}\nrun\n"
            op = run(["dnf", "-y", "-q", "shell", "--allowerasing"], stdin=script, timeout=timeout,
                     description=f"run: dnf shell: remove {' '.join(work.remove)}; install {' '.join(work.install)}")
        return PackageOp(op.request, op.description, transaction=work)

    def repair(self, unfinished: tuple[Unfinished, ...], lock_timeout: float = LOCK_TIMEOUT) -> list[Op]:
        """An rpm transaction cut short leaves the old version of a package installed beside the
        new one: dnf removes the older of each pair (dnf(8), `remove --duplicates`)."""
        op = run(["dnf", "-y", "-q", "remove", "--duplicates"], timeout=1800 + lock_timeout)
        return [PackageOp(op.request, op.description, repair=True)]

    def hold(self, names: list[str], hold: bool, versions: dict[str, str] | None = None) -> Op:
        if not hold:
            return run(["dnf", "-q", "versionlock", "delete", *names], timeout=120)
        specs = [self.spec(n, (versions or {}).get(n)) for n in names]
        return run(["dnf", "-q", "versionlock", "add", *specs], timeout=120)


Backend = AptBackend | DnfBackend


def backend_for(packages: PackageSet) -> Backend:
    return DnfBackend() if packages.backend == "dnf" else AptBackend()


@dataclass(frozen=True)
class PackageHost:
    """Where every package task starts (package, nvidia_driver_stack, nvidia_driver_companion): the
    host's installed packages, its package manager, and the change that finishes an interrupted
    transaction, which goes first (apt and dnf refuse to start another until it is done)."""

    packages: PackageSet
    backend: Backend
    repair: list[Change]


def package_host(facts: Facts, lock_timeout: float | None = None, backend: str = "auto") -> PackageHost:
    """The host's packages as read by INSTALLED; `backend` apt or dnf overrides the host's own."""
    packages = package_set(facts, facts.platform)
    chosen: Backend = (AptBackend() if backend == "apt" else DnfBackend() if backend == "dnf"
                       else backend_for(packages))
    wait = AptBackend.LOCK_TIMEOUT if lock_timeout is None else lock_timeout
    return PackageHost(packages, chosen, repair_changes(packages, wait))


def repair_changes(packages: PackageSet, lock_timeout: float = AptBackend.LOCK_TIMEOUT) -> list[Change]:
    """The change that finishes an interrupted package manager's work, or none. Every task that
    runs a package transaction puts it first: apt and dnf refuse to start one until it is done."""
    if not packages.unfinished and not packages.journal:
        return []
    backend = backend_for(packages)
    ops = backend.repair(packages.unfinished, lock_timeout)
    shown = [f"{u.name} {u.state}" for u in packages.unfinished[:5]]
    if len(packages.unfinished) > 5:
        shown.append(f"{len(packages.unfinished) - 5} more")
    ran = " and ".join(f"`{op.description.removeprefix('run: ')}`" for op in ops)
    if isinstance(backend, DnfBackend):
        return [Change(f"an rpm transaction was interrupted: {', '.join(shown)}; apply runs {ran}", ops)]
    count = len(packages.journal)
    what = ", ".join(shown) or (f"its journal (/var/lib/dpkg/updates) holds {count} change{'s' * (count != 1)} "
                                "not yet in its status file")
    return [Change(f"dpkg was interrupted: {what}; apply runs {ran}", ops)]


def lock_error(output: str, lock_timeout: float) -> str | None:
    """A failure because another process holds the dpkg lock, said plainly, with the holder's PID
    when apt or dpkg names it."""
    held = LOCK_HELD.search(output) or DPKG_LOCKED.search(output)
    if held:
        who = f"process {held['pid']}" + (f" ({held['name']})" if held.groupdict().get("name") else "")
        return (f"the dpkg lock is held by {who}: waited {lock_timeout:g} s (lock_timeout) and left it alone; "
                "retry when it has finished, or raise lock_timeout")
    if LOCK_FAILED.search(output):
        return (f"the dpkg lock is held by another process: waited {lock_timeout:g} s (lock_timeout) "
                "and left it alone")
    return None


class PackageParams(Params):
    name: str | list[str]
    version: str | None = None
    state: Literal["present", "absent", "purged"] = "present"
    hold: bool | None = None
    backend: Literal["auto", "apt", "dnf"] = "auto"  # auto: the host's platform's
    lock_timeout: float = Field(AptBackend.LOCK_TIMEOUT, ge=0, le=86400)  # seconds to wait for the dpkg lock

    @field_validator("name")
    @classmethod
    def _names(cls, value: str | list[str]) -> str | list[str]:
        for name in [value] if isinstance(value, str) else value:
            if not PACKAGE_NAME.match(name):
                raise ValueError(f"'{name}' is not a valid package name")
        return value

    @model_validator(mode="after")
    def _version_present(self) -> PackageParams:
        if self.version is not None and self.state != "present":
            raise ValueError("'version' only applies to state present")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) if isinstance(self.name, str) else tuple(self.name)


class Package(JoinsTransactions[PackageParams]):
    """Packages present (optionally at an exact version), absent or purged; held or unheld
    (`apt-mark hold`, dnf versionlock). apt or dnf is the host's platform's (its os-release). Waits up
    to `lock_timeout` seconds (default 120) for the dpkg lock, then fails naming the holder's
    PID; it never kills the holder."""

    name = "package"
    Params = PackageParams

    def reads(self, params: PackageParams) -> list[Fact]:
        return INSTALLED

    def check(self, params: PackageParams, facts: Facts) -> Verdict:
        host = package_host(facts, params.lock_timeout, params.backend)
        packages, backend = host.packages, host.backend
        states = {name: packages.get(name) for name in params.names}
        changes = list(host.repair)
        allow_held = bool(params.hold)
        if params.state == "present":
            wanted = []
            for name in params.names:
                state = states[name]
                if state is None or not state.installed:
                    wanted.append((name, f"install {name}" + (f" {params.version}" if params.version else "")))
                elif params.version and not version_matches(state.version, params.version):
                    wanted.append((name, f"{name} {state.version} installed, want {params.version}"))
            if wanted:
                specs = [backend.spec(n, params.version) for n, _ in wanted]
                changes.append(Change("; ".join(s for _, s in wanted),
                                      [backend.install(specs, allow_held or any(_held(states[n]) for n, _ in wanted),
                                                       params.lock_timeout)],
                                      before={n: getattr(states[n], "version", None) for n, _ in wanted},
                                      after={n: params.version or "latest" for n, _ in wanted}))
        else:
            purge = params.state == "purged"
            present = [n for n in params.names if _installed(states[n]) or (purge and _config_only(states[n]))]
            if present:
                verb = "purge" if purge else "remove"
                changes.append(Change(f"{verb} {', '.join(present)}",
                                      [backend.remove(present, purge, any(_held(states[n]) for n in present),
                                                     params.lock_timeout)]))
        if params.hold is not None and params.state == "present":
            flip = [n for n in params.names if _held(states[n]) != params.hold]
            if flip:
                verb = "hold" if params.hold else "unhold"
                versions = {n: params.version or getattr(states[n], "version", "") for n in flip}
                changes.append(Change(f"{verb} {', '.join(flip)}", [backend.hold(flip, params.hold, versions)]))
        if changes:
            return drift(*changes)
        return in_sync(self._describe(params, states))

    def apply(self, ctx: ApplyContext, params: PackageParams, changes: list[Change]) -> None:
        apply_ops(ctx, [op for change in changes for op in change.ops], params.lock_timeout)

    @staticmethod
    def _describe(params: PackageParams, states: dict[str, Installed | None]) -> str:
        if params.state != "present":
            return f"{', '.join(params.names)} {params.state}"
        parts = []
        for name in params.names:
            state = states[name]
            parts.append(f"{name} {state.version if state else '?'}" + (" (held)" if _held(state) else ""))
        return ", ".join(parts) + " installed"
