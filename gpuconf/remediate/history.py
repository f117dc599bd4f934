"""Remediation history and journal: one SQLite file under the state directory.

Each remediation of a host is a row of `remediations`; its `step` column is the journal:
written, and committed, *before* the step it names is carried out (write-ahead), so a
controller killed at any point leaves the step it was in. A row whose `outcome` is still
NULL is open: the next run of `gpuconf remediate` carries it on instead of starting a new
one (and so never counts it twice towards a lemon). `steps` keeps every step with its time.

The schema has a version (`schema_version`); opening a file runs the migrations it lacks,
and a file from a newer gpuconf is refused with a message that says so.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gpuconf.errors import GpuconfError

FILE = "history.sqlite3"
LOCK = "remediate.lock"
# each entry takes the schema from its index to the next version
MIGRATIONS: list[list[str]] = [
    [
        "CREATE TABLE remediations (id INTEGER PRIMARY KEY, host TEXT NOT NULL, node TEXT NOT NULL, "
        "started REAL NOT NULL, ended REAL, outcome TEXT, finding TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '', "
        "step TEXT NOT NULL, run TEXT NOT NULL)",
        "CREATE INDEX remediations_host ON remediations (host, started)",
        "CREATE TABLE steps (remediation INTEGER NOT NULL REFERENCES remediations(id), at REAL NOT NULL, "
        "step TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '')",
    ],
    [  # version 2: what caused each remediation, for the lemon rule (gpuconf/remediate/lemon.py)
        "ALTER TABLE remediations ADD COLUMN cause TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE remediations ADD COLUMN fingerprint TEXT NOT NULL DEFAULT ''",
        # a row of version 1 has only its finding to tell: the check's reason names drift as such
        "UPDATE remediations SET cause = CASE WHEN finding LIKE 'gpuconf: drift:%' THEN 'drift' ELSE 'fault' END",
    ],
    [  # version 3: evidence bundles (gpuconf collect), each remediation's and those collected on their own
        "ALTER TABLE remediations ADD COLUMN bundle TEXT NOT NULL DEFAULT ''",
        "CREATE TABLE bundles (host TEXT NOT NULL, at REAL NOT NULL, path TEXT NOT NULL, "
        "remediation INTEGER REFERENCES remediations(id))",
    ],
    [  # version 4: hardware holds (gpuconf hardware lists them) and the circuit breaker's trips and resets
        "CREATE TABLE holds (remediation INTEGER NOT NULL REFERENCES remediations(id), host TEXT NOT NULL, "
        "node TEXT NOT NULL, code TEXT NOT NULL, serial TEXT NOT NULL, pci TEXT NOT NULL, count INTEGER NOT NULL, "
        "first_seen REAL NOT NULL, last_seen REAL NOT NULL, reason TEXT NOT NULL)",
        "CREATE TABLE breaker (at REAL NOT NULL, event TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '')",
    ],
    [  # version 5: the drain reason gpuconf set last (set again after a reboot: Slurm rewrites it), and
        # the recovery action that decided the remediation (a run carried on knows it was a hardware action)
        "ALTER TABLE remediations ADD COLUMN reason TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE remediations ADD COLUMN action TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE remediations ADD COLUMN code TEXT NOT NULL DEFAULT ''",
        # the fleet as the runs' checks saw it: how many GPUs each host's findings named (the breaker's share)
        "CREATE TABLE fleet (host TEXT PRIMARY KEY, gpus INTEGER NOT NULL, seen REAL NOT NULL)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)
# outcomes: what a finished remediation came to; FOREIGN: someone else drained (or resumed) the
# node while gpuconf worked on it, and gpuconf left it to them
RESUMED, FAILED, LEMON, SKIPPED_BUSY, VERIFIED, INTERRUPTED, FOREIGN = (
    "resumed", "failed", "lemon", "skipped_busy", "verified", "interrupted", "foreign")
HARDWARE = "hardware"  # drained as a hardware hold: a person's from then on
TRIPPED, RESET = "tripped", "reset"  # the circuit breaker's events
# causes: the check found drift only, or a failure (a failed health probe, a task that failed or
# could not tell its state)
DRIFT, FAULT = "drift", "fault"
# how the check words a reason that is drift (gpuconf.scheduler.healthcheck.drain_reason)
DRIFT_FINDING = "gpuconf: drift:"


class HistoryError(GpuconfError):
    """The history database cannot be opened, is newer than this gpuconf, or is in use."""


@dataclass(frozen=True)
class Record:
    id: int
    host: str
    node: str
    started: float
    ended: float | None
    outcome: str | None  # None: open (a run stopped in it)
    finding: str
    detail: str
    step: str
    run: str
    cause: str = ""  # DRIFT or FAULT
    fingerprint: str = ""  # of the changes the check planned (drift): the same drift has the same one
    bundle: str = ""  # the evidence bundle collected before its repair (gpuconf collect), if any
    reason: str = ""  # the drain reason gpuconf set last on the node ("" before its drain)
    action: str = ""  # the recovery action that decided it (reset_gpu, reboot_node, ...), "" when none
    code: str = ""  # the fault that decided it ("Xid 79"), "" when none or the driver's action

    @property
    def open(self) -> bool:
        return self.outcome is None


def usable_state_dir(state_dir: Path) -> Path:
    """The state directory, or a HistoryError that names it when it is something else (a file)."""
    if state_dir.exists() and not state_dir.is_dir():
        raise HistoryError(f"--state-dir {state_dir} is not a directory: give a directory for the history "
                           "(GPUCONF_STATE_DIR or --state-dir)")
    return state_dir


class History:
    """The history of one state directory. Safe to share between threads."""

    def __init__(self, state_dir: Path, *, create: bool = True):
        self.path = usable_state_dir(state_dir) / FILE
        if not create and not self.path.exists():
            raise HistoryError(f"no remediation history at {self.path} (gpuconf remediate writes it; "
                               "--state-dir names another directory)")
        try:
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # the fleet's faults and serials: private
            if not self.path.exists():
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA synchronous = FULL")
        except sqlite3.OperationalError as exc:  # cannot open or lock it: a directory, permissions
            raise HistoryError(f"cannot open the remediation history {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{self.path} is not a gpuconf history database: {exc}") from None
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"cannot open the remediation history {self.path}: {exc}") from None
        self._lock = threading.Lock()
        self._migrate()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise HistoryError(f"{self.path}: {exc}") from None
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def _migrate(self) -> None:
        try:
            with self._write() as db:
                db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                row = db.execute("SELECT version FROM schema_version").fetchone()
                version = row[0] if row else 0
                if version > SCHEMA_VERSION:
                    raise HistoryError(
                        f"{self.path}: the history's schema is version {version}, newer than this gpuconf knows "
                        f"({SCHEMA_VERSION}): run a newer gpuconf, or give another --state-dir")
                for statements in MIGRATIONS[version:]:
                    for statement in statements:
                        db.execute(statement)
                if row is None:
                    db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
                else:
                    db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{self.path} is not a gpuconf history database: {exc}") from None

    @property
    def version(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT version FROM schema_version").fetchone()[0])

    # -- writing ------------------------------------------------------------
    def begin(self, host: str, node: str, finding: str, run: str, step: str = "begin",
              started: float | None = None, cause: str | None = None, fingerprint: str = "") -> int:
        """A new open remediation, its first step already journaled. Without a cause, the finding
        tells it (`gpuconf: drift: ...` is drift)."""
        at = time.time() if started is None else started
        with self._write() as db:
            cursor = db.execute("INSERT INTO remediations (host, node, started, finding, step, run, cause, "
                                "fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                (host, node, at, finding, step, run, cause or cause_of(finding), fingerprint))
            record = int(cursor.lastrowid or 0)
            db.execute("INSERT INTO steps VALUES (?, ?, ?, '')", (record, at, step))
        return record

    def step(self, record: int, step: str, detail: str = "") -> None:
        """Journal a step before it is carried out."""
        with self._write() as db:
            db.execute("UPDATE remediations SET step = ? WHERE id = ?", (step, record))
            db.execute("INSERT INTO steps VALUES (?, ?, ?, ?)", (record, time.time(), step, detail))

    def set_reason(self, record: int, reason: str) -> None:
        """The drain reason gpuconf has just set on the node (written after the scheduler took it)."""
        with self._write() as db:
            db.execute("UPDATE remediations SET reason = ? WHERE id = ?", (reason, record))

    def set_action(self, record: int, action: str, code: str = "") -> None:
        """The recovery action deciding this remediation and its fault's code, journalled before its
        first node action."""
        with self._write() as db:
            db.execute("UPDATE remediations SET action = ?, code = ? WHERE id = ?", (action, code, record))

    def finish(self, record: int, outcome: str, detail: str = "", ended: float | None = None) -> None:
        at = time.time() if ended is None else ended
        with self._write() as db:
            db.execute("UPDATE remediations SET outcome = ?, detail = ?, ended = ?, step = 'done' WHERE id = ?",
                       (outcome, detail, at, record))
            db.execute("INSERT INTO steps VALUES (?, ?, 'done', ?)", (record, at, f"{outcome}: {detail}".rstrip(": ")))

    def add(self, host: str, node: str, outcome: str, finding: str, detail: str = "", started: float | None = None,
            run: str = "manual", cause: str | None = None, fingerprint: str = "") -> int:
        """A finished remediation in one go (an import, or a test's seed)."""
        record = self.begin(host, node, finding, run, started=started, cause=cause, fingerprint=fingerprint)
        self.finish(record, outcome, detail, ended=started)
        return record

    def add_bundle(self, host: str, path: str, remediation: int | None = None, at: float | None = None) -> None:
        """An evidence bundle of `host`; with `remediation`, that remediation's own (before its repair)."""
        with self._write() as db:
            db.execute("INSERT INTO bundles VALUES (?, ?, ?, ?)",
                       (host, time.time() if at is None else at, path, remediation))
            if remediation is not None:
                db.execute("UPDATE remediations SET bundle = ? WHERE id = ?", (path, remediation))

    def add_hold(self, hold: Hold) -> None:
        with self._write() as db:
            db.execute("INSERT INTO holds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (hold.remediation, hold.host, hold.node, hold.code, hold.serial, hold.pci, hold.count,
                        hold.first_seen, hold.last_seen, hold.reason))

    def breaker_event(self, event: str, detail: str = "", at: float | None = None) -> None:
        """The circuit breaker tripped (TRIPPED) or a person reset it (RESET)."""
        with self._write() as db:
            db.execute("INSERT INTO breaker VALUES (?, ?, ?)", (time.time() if at is None else at, event, detail))

    def see_gpus(self, host: str, gpus: int, at: float | None = None) -> None:
        """How many GPUs a run's check of the host found (0: none, a login or storage node)."""
        with self._write() as db:
            db.execute("INSERT INTO fleet VALUES (?, ?, ?) ON CONFLICT(host) DO UPDATE SET gpus = excluded.gpus, "
                       "seen = excluded.seen", (host, gpus, time.time() if at is None else at))

    # -- reading ------------------------------------------------------------
    def gpu_hosts(self) -> set[str]:
        """The hosts whose latest check found GPUs."""
        with self._lock:
            return {str(h) for (h,) in self._db.execute("SELECT host FROM fleet WHERE gpus > 0")}

    def holds(self) -> list[Hold]:
        """Every hardware hold recorded, oldest first, with its evidence bundle: the remediation's own,
        else the host's latest since the remediation began (a `gpuconf collect` of the held node: no
        reset has erased its state)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT h.remediation, h.host, h.node, h.code, h.serial, h.pci, h.count, h.first_seen, h.last_seen, "
                "h.reason, COALESCE(NULLIF(r.bundle, ''), (SELECT b.path FROM bundles b WHERE b.host = h.host "
                "AND b.at >= r.started ORDER BY b.at DESC, b.rowid DESC LIMIT 1), '') "
                "FROM holds h JOIN remediations r ON r.id = h.remediation ORDER BY h.last_seen, h.rowid").fetchall()
        return [Hold(*row) for row in rows]

    def breaker_events(self) -> list[tuple[float, str, str]]:
        """(time, event, detail) of the breaker, oldest first."""
        with self._lock:
            return [(float(a), str(e), str(d)) for a, e, d in
                    self._db.execute("SELECT at, event, detail FROM breaker ORDER BY at, rowid")]

    def bundles(self, host: str | None = None) -> list[tuple[str, float, str]]:
        """(host, time, path) of every bundle collected, oldest first."""
        query, args = "SELECT host, at, path FROM bundles", tuple[str, ...]()
        if host is not None:
            query, args = query + " WHERE host = ?", (host,)
        with self._lock:
            return [(str(h), float(a), str(p)) for h, a, p in self._db.execute(query + " ORDER BY at, rowid", args)]

    def records(self, host: str | None = None) -> list[Record]:
        query = ("SELECT id, host, node, started, ended, outcome, finding, detail, step, run, cause, fingerprint, "
                 "bundle, reason, action, code FROM remediations")
        args: tuple[str, ...] = ()
        if host is not None:
            query, args = query + " WHERE host = ?", (host,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY started, id", args).fetchall()
        return [Record(*row) for row in rows]

    def record(self, record: int) -> Record:
        return next(r for r in self.records() if r.id == record)

    def open_records(self) -> dict[str, Record]:
        """The remediations a run left open, by host (the latest, should there be several)."""
        return {r.host: r for r in self.records() if r.open}

    def steps(self, record: int) -> list[tuple[float, str, str]]:
        with self._lock:
            return [tuple(row) for row in self._db.execute(
                "SELECT at, step, detail FROM steps WHERE remediation = ? ORDER BY at, rowid", (record,))]


@dataclass(frozen=True)
class Hold:
    """A node drained as a hardware hold: what an RMA request needs."""

    remediation: int
    host: str
    node: str
    code: str  # "Xid 79", "SXid 12028", or the driver's recovery action
    serial: str
    pci: str
    count: int  # occurrences this boot, as the finding counted them
    first_seen: float
    last_seen: float
    reason: str  # the drain reason set
    bundle: str = ""  # the evidence bundle collected for that remediation, if any


def cause_of(finding: str) -> str:
    """DRIFT when the check's reason is drift (`gpuconf: drift: ...`), else FAULT."""
    return DRIFT if finding.startswith(DRIFT_FINDING) else FAULT


class RunLock:
    """One remediation at a time per state directory: an flock, released when the process ends
    (a killed run leaves no stale lock)."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / LOCK
        self._file: IO[str] | None = None

    def __enter__(self) -> RunLock:
        usable_state_dir(self.path.parent).mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 - held for the whole run
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise HistoryError(f"another gpuconf remediate is running with the state directory {self.path.parent} "
                               f"({holder}); wait for it, or give another --state-dir") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._file = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
