"""`gpuconf catalog`: the branch catalog as a table, with how old its knowledge of each branch's
newest point release is; with --from-redistrib, what NVIDIA's release data says to update."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from gpuconf.driver import catalog as branches
from gpuconf.driver import releases
from gpuconf.errors import UsageError
from gpuconf.files.bounded import read_source


def age(learned: dt.date, today: dt.date) -> str:
    days = (today - learned).days
    if days < 0:
        return f"{-days} days ahead of --today"
    return "today" if days == 0 else f"{days} day{'s' if days != 1 else ''} ago"


def table(today: dt.date) -> list[str]:
    rows = [("BRANCH", "KIND", "STATUS", "END OF LIFE", "FLAVOURS", "NEWEST", "LEARNED")]
    for row in branches.catalog().branches:
        status = "ended" if row.ended(today) else "supported"
        end = row.eol.isoformat() if row.eol else (f"superseded by {row.superseded_by}" if row.superseded_by else "-")
        flavours = "/".join(f for f, ships in (("open", row.open), ("proprietary", row.proprietary)) if ships)
        newest = row.newest.version if row.newest else "unknown"
        learned = f"{row.newest.learned.isoformat()} ({age(row.newest.learned, today)})" if row.newest else "-"
        rows.append((str(row.branch), row.kind, status, end, flavours, newest, learned))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    for bulletin in branches.catalog().bulletins:
        fixed = ", ".join(f"{b}: {v}" for b, v in sorted(bulletin.fixed.items()))
        lines.append(f"bulletin {bulletin.id} ({bulletin.published.isoformat()}, {age(bulletin.published, today)}): "
                     f"{bulletin.title}; fixed in {fixed}")
    return lines


def show(today: dt.date, redistrib: list[str] | None = None) -> int:
    """The catalog's table as of `today`; with `redistrib` (--from-redistrib), the point releases
    those NVIDIA release manifests propose to add."""
    if not redistrib:
        print("\n".join(table(today)))
        return 0
    found: list[releases.Release] = []
    for name in redistrib:
        path = Path(name)
        # a regular file of bounded size: /dev/zero or a FIFO would never end (README, "Input")
        text = read_source(path, UsageError).decode("utf-8", errors="replace")
        found += releases.read(text, path.name)
    proposed = releases.proposals(branches.catalog(), found)
    seen = ", ".join(sorted({r.version for r in found}, key=branches.version_key))
    print(f"read {len(found)} release(s): {seen}")
    print("\n".join(proposed) if proposed else "the catalog already knows these point releases or newer ones")
    return 0
