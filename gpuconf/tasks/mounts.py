"""Mounts: a filesystem mounted now (or not), and /etc/fstab kept in step so that the next boot
does the same. The mount table comes from findmnt, the boot's from /etc/fstab; apply writes the
fstab line first and then mounts from it (`mount PATH`), so what is mounted now is what the fstab
line gives at boot."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gpuconf.facts.base import Fact, FileState, Output, command, file_state
from gpuconf.facts.mounts import (
    FINDMNT,
    Mount,
    kernel_options,
    meminfo_bytes,
    missing_options,
    parse_findmnt_list,
    parse_fstab,
    size_bytes,
)
from gpuconf.tasks.base import (
    Change,
    Facts,
    Params,
    Refused,
    TaskType,
    Unknown,
    Verdict,
    drift,
    in_sync,
    run,
    write_file,
)

FSTAB = "/etc/fstab"
MEMINFO = file_state("/proc/meminfo")
FSTYPES = Literal["tmpfs", "nfs", "nfs4", "xfs", "ext4", "lustre", "hugetlbfs", "none"]


def _table(out: Output) -> tuple[Mount, ...] | str:
    if out.timed_out or out.rc != 0:
        return f"findmnt failed (exit {out.rc}): {out.stderr.strip()[:200]}"
    return parse_findmnt_list(out.stdout)


TABLE = command(FINDMNT, _table, timeout=10)


class MountParams(Params):
    path: str
    src: str = Field(min_length=1)
    fstype: FSTYPES
    opts: str = "defaults"
    state: Literal["present", "absent"] = "present"
    dump: int = Field(0, ge=0)
    passno: int = Field(0, ge=0, le=2)
    # tmpfs: the memory the node must keep for its jobs (a size, `512G`, or a share of MemTotal,
    # `50%`); a size that would leave less is refused
    keep_for_jobs: str | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/") or value != value.rstrip("/") or any(c.isspace() for c in value):
            raise ValueError(f"path must be an absolute path without spaces or a trailing /, not '{value}'")
        return value

    @field_validator("src", "opts")
    @classmethod
    def _word(cls, value: str) -> str:
        if any(c.isspace() for c in value) or "#" in value:
            raise ValueError(f"'{value}' cannot hold a space or '#' (an fstab field)")
        return value

    @property
    def options(self) -> list[str]:
        return self.opts.split(",")

    @property
    def fstab_line(self) -> str:
        return f"{self.src}\t{self.path}\t{self.fstype}\t{self.opts}\t{self.dump}\t{self.passno}\n"


class MountTask(TaskType[MountParams]):
    """A filesystem mounted at `path` (`src`, `fstype`, `opts`) now and at boot (`state:
    present`), or neither (`absent`). /etc/fstab holds exactly one line for `path`, with the other
    lines kept as they are; a mounted filesystem whose options differ is remounted with the new
    ones (`mount -o remount`), one whose source or type differ is unmounted and mounted again.
    Types: tmpfs, nfs, nfs4, xfs, ext4, lustre, hugetlbfs, none (a bind mount: `opts: bind`)."""

    name = "mount"
    Params = MountParams

    def reads(self, params: MountParams) -> list[Fact]:
        return [TABLE, file_state(FSTAB), MEMINFO]

    def check(self, params: MountParams, facts: Facts) -> Verdict:
        table = facts[TABLE]
        if isinstance(table, str):
            raise Unknown(table)
        fstab: FileState = facts[file_state(FSTAB)]
        text = fstab.text or "" if fstab.exists else ""
        memory = meminfo_bytes(facts[MEMINFO].text or "") if facts[MEMINFO].exists else None
        if params.state == "present" and params.fstype == "tmpfs" and params.keep_for_jobs:
            refuse_oversized(params, memory)
        mounted = [m for m in table if m.target == params.path]
        current = mounted[-1] if mounted else None   # the one on top
        entries = [e for e in parse_fstab(text) if e.file == params.path]
        lines = text.splitlines(keepends=True)
        others = [line for number, line in enumerate(lines) if number not in {e.line for e in entries}]
        if others and not others[-1].endswith("\n"):
            others[-1] += "\n"
        changes: list[Change] = []
        if params.state == "present":
            exact = len(entries) == 1 and lines[entries[0].line].split("#", 1)[0].split() == params.fstab_line.split()
            if not exact:
                wanted = "".join(others) + params.fstab_line
                changes.append(Change(f"{FSTAB}: mount {params.src} at {params.path} at boot "
                                      f"({params.fstype}, {params.opts})",
                                      [write_file(FSTAB, wanted, fstab.mode or 0o644)],
                                      before="".join(lines[e.line] for e in entries) or None,
                                      after=params.fstab_line))
            if current is None:
                changes.append(Change(f"mount {params.src} at {params.path} ({params.fstype}, {params.opts})",
                                      [run(["mkdir", "-p", params.path]), run(["mount", params.path])],
                                      before="not mounted", after="mounted"))
            elif current.fstype != params.fstype or (params.fstype != "none" and current.source != params.src
                                                     and params.fstype != "tmpfs"):
                changes.append(Change(f"{params.path}: {current.source} ({current.fstype}) is mounted, not "
                                      f"{params.src} ({params.fstype}): unmount and mount again",
                                      [run(["umount", params.path]), run(["mount", params.path])],
                                      before=f"{current.source} {current.fstype}",
                                      after=f"{params.src} {params.fstype}"))
            else:
                missing = missing_options(params.options, current.options, memory)
                if missing:
                    remount = ",".join(["remount", *kernel_options(params.options)])
                    changes.append(Change(f"{params.path}: remount with {','.join(missing)}",
                                          [run(["mount", "-o", remount, params.path])],
                                          before=",".join(current.options), after=params.opts))
        else:
            if entries:
                changes.append(Change(f"{FSTAB}: no longer mount anything at {params.path} at boot",
                                      [write_file(FSTAB, "".join(others), fstab.mode or 0o644)],
                                      before="".join(lines[e.line] for e in entries), after=None))
            if current is not None:
                changes.append(Change(f"unmount {params.path} ({current.source}, {current.fstype})",
                                      [run(["umount", params.path])], before="mounted", after="not mounted"))
        if changes:
            return drift(*changes)
        if params.state == "present":
            return in_sync(f"{params.src} is mounted at {params.path} ({params.fstype}, {params.opts}), "
                           f"and at boot", options=list(current.options) if current else [])
        return in_sync(f"nothing is mounted at {params.path}, nor at boot")


def gib(value: int) -> str:
    return f"{value / (1 << 30):.1f} GiB"


def refuse_oversized(params: MountParams, memory: int | None) -> None:
    """A tmpfs whose size would leave the jobs less than `keep_for_jobs` of the node's memory."""
    if memory is None:
        raise Unknown("/proc/meminfo gives no MemTotal: the RAM disk's size cannot be judged")
    sizes = [o.split("=", 1)[1] for o in params.options if o.startswith("size=")]
    size = size_bytes(sizes[-1], memory) if sizes else memory // 2   # tmpfs' default: half of RAM
    keep = size_bytes(str(params.keep_for_jobs), memory)
    if size is None or keep is None:
        raise Refused(f"cannot read size={sizes[-1] if sizes else ''} or keep_for_jobs={params.keep_for_jobs} "
                      "as a size (64G, 512M) or a share of memory (50%)")
    if memory - size < keep:
        raise Refused(f"a {gib(size)} RAM disk at {params.path} would leave the jobs {gib(max(memory - size, 0))} "
                      f"of the node's {gib(memory)}; they need {gib(keep)} (keep_for_jobs: {params.keep_for_jobs})")
