"""`gpuconf remediate` and `gpuconf history`: the engine as the loop's hooks, Slurm as its
scheduler (the interface: gpuconf/scheduler/interface.py), the history under the state directory,
SIGINT and SIGTERM as a clean stop."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuconf.connection.base import Connection
from gpuconf.connection.lock import LOCK_PATH
from gpuconf.connection.resolve import connect
from gpuconf.engine.options import RunOptions
from gpuconf.engine.runner import Runner
from gpuconf.errors import UsageError
from gpuconf.files.state import bundles_dir
from gpuconf.inventory.hosts import Inventory
from gpuconf.inventory.patterns import match_hosts
from gpuconf.playbook.models import Playbook
from gpuconf.remediate import plan, reset
from gpuconf.remediate.breaker import parse_breaker
from gpuconf.remediate.decision import APP, Decision, decide_action
from gpuconf.remediate.firmware import firmware_hold
from gpuconf.remediate.history import DRIFT, FAULT, FILE, History, Record, RunLock
from gpuconf.remediate.hold import read_serials
from gpuconf.remediate.lemon import LemonRule, judge
from gpuconf.remediate.loop import Remediation, Settings
from gpuconf.remediate.preview import preview
from gpuconf.report.redact import visible_changes
from gpuconf.results import EXIT_DRIFT, EXIT_UNREACHABLE, HostResult, RunResult, Status
from gpuconf.scheduler.healthcheck import drain_reason
from gpuconf.scheduler.interface import PREFIX, REASON_MAX, reason_text
from gpuconf.scheduler.slurm import Slurm

# one remediation per node at a time, whatever the controller's state directory (its own run lock,
# remediate.lock in the state directory, is one per directory): held on the node itself
REMEDIATE_LOCK = "/run/gpuconf-remediate.lock"


class EngineHooks:
    """The loop's check and apply, as `gpuconf check` and `gpuconf apply` run them. The apply's reboot
    is the loop's (through the scheduler, after it has read the node's reason again)."""

    def __init__(self, inventory: Inventory, playbook: Playbook, health: Playbook | None, options: RunOptions,
                 stop: threading.Event, state_dir: Path):
        self.inventory, self.playbook, self.options, self.state_dir = inventory, playbook, options, state_dir
        plays = [*playbook.plays, *(health.plays if health else [])]
        self.checked = dataclasses.replace(playbook, plays=plays)  # the playbook and the health gate
        self.stop = stop
        self._runners: set[Runner] = set()
        self._lock = threading.Lock()
        self._held: dict[str, Decision] = {}  # host -> the hold its last apply asks for

    def interrupt(self) -> None:
        with self._lock:
            for runner in self._runners:
                runner.stop_event.set()

    def _run(self, playbook: Playbook, options: RunOptions, hosts: list[str]) -> RunResult:
        runner = Runner(self.inventory.narrowed(hosts), playbook, options)
        with self._lock:
            self._runners.add(runner)
            if self.stop.is_set():
                runner.stop_event.set()
        try:
            return runner.run()
        finally:
            with self._lock:
                self._runners.discard(runner)

    def check(self, hosts: list[str]) -> dict[str, plan.Verdict]:
        options = dataclasses.replace(self.options, verb="check")
        result = self._run(self.checked, options, hosts)
        return {h: verdict(result.hosts.get(h), h, options.strict) for h in hosts}

    def apply(self, host: str, reboot: Callable[[], None]) -> str | None:
        options = dataclasses.replace(self.options, verb="apply", reboot_via=lambda _host: reboot())
        result = self._run(self.playbook, options, [host])
        found = result.hosts.get(host)
        self._held.pop(host, None)
        if found is None:
            return None
        holds = [hold for hold in map(firmware_hold, found.tasks) if hold is not None]
        if holds:
            self._held[host] = holds[0]
        if found.unreachable:
            return f"unreachable: {found.error}"
        bad = [t for t in found.tasks if t.status in (Status.FAILED, Status.UNKNOWN, Status.REBOOT_PENDING)
               and not t.ignored]
        if bad:
            error = plan.first_line(bad[0].error or bad[0].message or bad[0].status.value)
            return f"apply: {bad[0].task}: {error}"
        return None

    @contextlib.contextmanager
    def _connection(self, host: str) -> Iterator[Connection]:
        """The host's connection as the run's own (gpuconf/connection/resolve.py), closed after."""
        connection = connect(self.inventory, host, self.options.reach)
        try:
            yield connection
        finally:
            connection.close()

    def held(self, host: str) -> Decision | None:
        return self._held.get(host)

    def claim(self, host: str) -> Callable[[], None]:
        """The node's remediation lock (REMEDIATE_LOCK), taken at once or not at all and held by a small
        process on the node for as long as its channel lives: a controller that dies, or a node that
        reboots, frees it. Another remediate, whatever its state directory, finds it taken and leaves
        the node (HostBusy names the holder)."""
        connection = connect(self.inventory, host, self.options.reach)
        owner = f"gpuconf remediate pid {os.getpid()} on {socket.gethostname()}, state {self.state_dir}"
        try:
            lock = connection.hold_lock(REMEDIATE_LOCK, 0, owner)
        except BaseException:
            connection.close()
            raise

        def release() -> None:
            with contextlib.suppress(Exception):  # the node rebooted meanwhile: the lock went with it
                lock.close()
            connection.close()
        return release

    def serials(self, host: str) -> dict[str, str]:
        with self._connection(host) as connection:
            return read_serials(connection)

    def collect(self, host: str) -> str:
        """The evidence bundle, before a reset or a reboot erases it: its path."""
        from gpuconf.remediate.evidence import collect

        with self._connection(host) as connection:
            return str(collect(host, connection, bundles_dir(self.state_dir)).path)

    def node_action(self, host: str, step: str, decision: Decision) -> reset.Outcome:
        """A GPU reset ("reset") or an IMEX restart ("imex"), holding the host's run lock (an apply
        started meanwhile by hand waits for it, and this for that)."""
        if step == "reset":
            script, parse = reset.reset_script(decision.buses, decision.resets_all), reset.parse_reset
        else:
            script, parse = reset.imex_script(), reset.parse_imex
        owner = f"gpuconf remediate ({step}) pid {os.getpid()} on {socket.gethostname()}"
        with self._connection(host) as connection:
            lock = connection.hold_lock(LOCK_PATH, self.options.lock_wait, owner)
            try:
                reply = connection.call([{"op": "run", "cmd": script, "timeout": reset.SCRIPT_TIMEOUT, "check": False}],
                                        readonly=False, timeout=reset.SCRIPT_TIMEOUT + 60, become=True)[0]
            finally:
                lock.close()
        return parse(str(reply.get("out") or reply.get("error") or ""), reply.get("rc"))


def gpus_named(host: HostResult) -> int:
    """The GPUs the check's findings name (the health probes name each GPU they read): 0 on a node
    without any, which the breaker's share leaves out."""
    return len({f.bus_id or f"index {f.gpu}" for t in host.tasks for f in t.findings
                if f.bus_id or f.gpu is not None})


def verdict(host: HostResult | None, name: str, strict: bool) -> plan.Verdict:
    if host is None:
        return plan.Verdict(name, True)
    if host.unreachable:
        return plan.Verdict(name, False, f"{PREFIX} unreachable: {plan.first_line(host.error or '')}",
                            unreachable=True)
    unclean = host.unclean(strict)
    if not unclean:
        # NVIDIA's catalog calls the restart_app Xids (13, 31, 45, 94) warnings: they fail no check,
        # yet remediate reports them and escalates a repeat (restart_app.py)
        apps = [f for t in host.tasks if not t.ignored for f in t.findings
                if f.severity == "warning" and f.action == "restart_app"]
        app = decide_action(apps, strict=True) if apps else None
        if app is None:
            return plan.Verdict(name, True, gpus=gpus_named(host))
        return plan.Verdict(name, False, f"{PREFIX} restart_app: {plan.first_line(app.finding)}", cause=FAULT,
                            decision=app, gpus=gpus_named(host))
    reason = drain_reason(host) or f"{PREFIX} health warning (--strict)"
    faults = [t for t in unclean if t.status != Status.WOULD_CHANGE]  # failed, or warned under --strict
    cause = FAULT if faults else DRIFT
    judged = [t for t in faults if not t.ignored]  # an ignored task's warnings count, its findings decide nothing
    findings = [f for t in judged for f in t.findings]
    decision = decide_action(findings, strict)
    if decision is not None:  # the drain names the fault that decided, not the first task that failed
        more = len(judged) - 1
        reason = reason_text(f"{PREFIX} failed: {plan.first_line(decision.finding)}"
                             + (f" (+{more} more)" if more > 0 else ""))
        if more > 0 and not reason.endswith(f"(+{more} more)"):
            reason = reason[: REASON_MAX - len(f"… (+{more} more)")] + f"… (+{more} more)"
    if decision is not None and decision.kind == APP and (host.drifted or any(
            not any(f.action == "restart_app" for f in t.findings) for t in judged)):
        decision = None  # something else needs the apply: the node is remediated as for any failure
    changes = tuple(c.summary for t in host.tasks if t.status == Status.WOULD_CHANGE and not t.ignored
                    for c in visible_changes(t))
    return plan.Verdict(name, False, reason, cause=cause, fingerprint=drift_fingerprint(host) if cause == DRIFT else "",
                        decision=decision, changes=changes, gpus=gpus_named(host))


def drift_fingerprint(host: HostResult) -> str:
    """The changes the check planned for a drifted host, hashed: the same drift (the same tasks
    wanting the same state) has the same fingerprint; a new desired state (the playbook, its roles
    or its variables changed) another. A change counts by its summary and what it wants: `after`
    and the added lines of its diff, not the lines it removes (what the node has now may differ
    from one time to the next). A secret task's changes are hidden first: only that it drifted goes in."""
    digest = hashlib.sha256()
    for task in host.tasks:
        if task.status != Status.WOULD_CHANGE or task.ignored:
            continue
        wanted = [[c.summary, repr(c.after), [line for line in (c.diff or "").splitlines()
                                              if line.startswith("+") and not line.startswith("+++")]]
                  for c in visible_changes(task)]
        digest.update(json.dumps([task.play, task.task, task.type, wanted]).encode())
    return digest.hexdigest()[:16]


def scope(inventory: Inventory, playbook: Playbook) -> dict[str, str]:
    """The hosts the playbook's plays run on (within --limit): inventory host -> Slurm node name."""
    hosts = sorted({h for play in playbook.plays for h in match_hosts(inventory, play.hosts)})
    if not hosts:
        raise UsageError(f"no host of {inventory.source} is in the plays' hosts: nothing to remediate")
    return {h: str(inventory.host_vars(h).get("slurm_node_name", h)) for h in hosts}


@dataclass(frozen=True)
class RemediateOptions:
    """What `gpuconf remediate` is asked beyond the run's options (gpuconf/cli/verbs.py builds it)."""

    settings: Settings
    state_dir: Path
    check: bool = False  # --check: each node's plan, nothing changed
    report: Path | None = None


def settings(*, max_unavailable: str, drain_timeout: str, lemon_after: int, lemon_window: str,
             breaker: str | None, breaker_window: str, restart_app_window: str, hold_after_reboots: int,
             reboot_window: str) -> Settings:
    """The loop's settings from the command line's words (a bad one is a UsageError naming its option)."""
    if lemon_after < 0:
        raise UsageError("--lemon-after must be 0 (never a lemon) or more")
    if hold_after_reboots < 1:
        raise UsageError(f"--hold-after-reboots {hold_after_reboots}: give 1 (the hold after the first reboot "
                         "the fault survives) or more")
    return Settings(budget=plan.parse_budget(max_unavailable),
                    drain_timeout=plan.parse_duration(drain_timeout, "--drain-timeout"),
                    lemon=LemonRule(lemon_after, plan.parse_duration(lemon_window, "--lemon-window")),
                    breaker=parse_breaker(breaker, plan.parse_duration(breaker_window, "--breaker-window")),
                    app_window=plan.parse_duration(restart_app_window, "--restart-app-window"),
                    hold_after_reboots=hold_after_reboots,
                    reboot_window=plan.parse_duration(reboot_window, "--reboot-window"),
                    poll=float(os.environ.get("GPUCONF_REMEDIATE_POLL", "2")),
                    run_id=f"{socket.gethostname()}:{os.getpid()}:{int(time.time())}")


def run(remediate: RemediateOptions, inventory: Inventory, playbook: Playbook, health: Playbook | None,
        options: RunOptions) -> int:
    config = remediate.settings
    hosts = scope(inventory, playbook)
    state_dir = remediate.state_dir
    stop = threading.Event()
    scheduler = Slurm()
    hooks = EngineHooks(inventory, playbook, health, options, stop, state_dir)
    if remediate.check:
        return check_only(hosts, hooks, scheduler, state_dir, config)

    def say(line: str) -> None:
        print(line, flush=True)

    def interrupt(signum: int, frame: object) -> None:  # the current steps end; nothing new starts
        stop.set()
        hooks.interrupt()

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    if threading.current_thread() is threading.main_thread():
        for sig in handlers:
            signal.signal(sig, interrupt)
    try:
        with RunLock(state_dir):
            history = History(state_dir)
            try:
                summary = Remediation(hosts, scheduler, hooks, history, config, say, stop).run()
            finally:
                history.close()
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
    for line in summary.lines():
        print(line)
    if remediate.report is not None:
        summary.write(remediate.report)
    return summary.exit_code


def check_only(hosts: dict[str, str], hooks: EngineHooks, scheduler: Slurm, state_dir: Path, config: Settings) -> int:
    """`remediate --check`: the plan of each node and the budget it spends; reads only (no lock, no
    history written: an existing one is read, and only an older schema's migration writes to it; no
    scheduler command but `scontrol show`)."""
    verdicts = hooks.check(sorted(hosts))
    states = scheduler.nodes(hosts.values())
    records: list[Record] = []
    events: list[tuple[float, str, str]] = []
    gpu_hosts = {h for h, v in verdicts.items() if v.gpus}
    if (state_dir / FILE).exists():
        store = History(state_dir, create=False)
        try:
            records, events, gpu_hosts = store.records(), store.breaker_events(), gpu_hosts | store.gpu_hosts()
        finally:
            store.close()
    for line in preview(hosts, verdicts, states, records, events, config.budget.limit(len(hosts)), config.lemon,
                        config.breaker, time.time(), config.app_window, gpu_hosts):
        print(line)
    unclean = [v for v in verdicts.values() if not v.clean]
    return (EXIT_DRIFT if unclean else 0) | (EXIT_UNREACHABLE if any(v.unreachable for v in unclean) else 0)


def history(host: str, state_dir: Path, as_json: bool = False) -> int:
    """`gpuconf history HOST`: its remediations, newest last, with the journal's steps."""
    if not (state_dir / FILE).exists():  # nothing was ever remediated with this state directory
        print(json.dumps({"host": host, "remediations": []}) if as_json else
              f"{host}: no remediation recorded (no history at {state_dir / FILE})")
        return 0
    store = History(state_dir, create=False)
    try:
        judged = judge(store.records(host))
        if as_json:
            data = [dict(dataclasses.asdict(j.record), lemon={"counted": j.counted, "why": j.why},
                         steps=[{"at": at, "step": step, "detail": detail}
                                for at, step, detail in store.steps(j.record.id)])
                    for j in judged]
            print(json.dumps({"host": host, "schema_version": store.version, "remediations": data}, indent=2))
            return 0
    finally:
        store.close()
    if not judged:
        print(f"{host}: no remediation in {store.path}")
        return 0
    rows = [("STARTED (UTC)", "OUTCOME", "STEP", "FINDING", "LEMON RULE", "DETAIL")]
    rows += [(_when(j.record.started), j.record.outcome or "open", j.record.step, j.record.finding, j.why,
              j.record.detail) for j in judged]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) if i < 5 else cell for i, cell in enumerate(row)).rstrip())
    return 0


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def load_health(path: str | None, playbook_path: str, project: Path, roles: list[Path]) -> Playbook | None:
    """--health FILE, else the project's playbooks/gpu-health.yml when there is one; `none`: no gate."""
    from gpuconf.playbook.loader import load_playbook

    if path == "none":
        return None
    if path:
        return load_playbook(path, project, roles)
    for base in (Path(playbook_path).resolve().parent, project / "playbooks"):
        candidate = base / "gpu-health.yml"
        if candidate.is_file():
            return load_playbook(candidate, project, roles)
    print("gpuconf: warning: no playbooks/gpu-health.yml found: the health gate is the playbook's check alone "
          "(--health FILE names one, --health none says so)", file=sys.stderr)
    return None
