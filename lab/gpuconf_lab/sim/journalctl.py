"""``journalctl`` and ``dmesg`` over the node's simulated journal and kernel ring buffer.

Output formats are the real ones (``fixtures/real/dmesg``): dmesg's ``[   12.345678] msg``,
``-T`` ctime, ``--time-format=iso``, ``-x`` decode prefixes; journalctl's short, short-iso,
short-precise, short-monotonic, cat and json. The journal is volatile (as on a host without
``/var/log/journal``), so only the current boot exists.
"""
from __future__ import annotations

import json
import re
import sys
import time

import entry
import logs
import state

CLEARED = f"{state.RUN}/kmsg-cleared"


def _host() -> str:
    return state.hostname()


def _ident(item: dict) -> str:
    if "i" not in item:
        return "kernel"
    return f"{item['i']}[{item['pid']}]" if item.get("pid") else item["i"]


def format_entry(item: dict, fmt: str, hostname: str | None = None) -> str:
    host = _host() if hostname is None else hostname
    message = item["m"]
    who = f"{host} {_ident(item)}" if host else _ident(item)
    if fmt == "cat":
        return message
    if fmt == "json":
        boot = state.boot_info().get("boot_id", "").replace("-", "")
        record = {"__REALTIME_TIMESTAMP": str(int(item["w"] * 1e6)), "__MONOTONIC_TIMESTAMP": str(int(item["t"] * 1e6)),
                  "_BOOT_ID": boot, "PRIORITY": str(item.get("p", 6)), "_HOSTNAME": _host(), "MESSAGE": message,
                  "SYSLOG_IDENTIFIER": item.get("i", "kernel"), "_TRANSPORT": "kernel" if "i" not in item else "stdout"}
        if item.get("pid"):
            record["_PID"] = str(item["pid"])
        if item.get("u"):
            record["_SYSTEMD_UNIT" if item.get("i") != "systemd" else "UNIT"] = item["u"]
        return json.dumps(record)
    if fmt == "short-iso":
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(item["w"]))
    elif fmt == "short-iso-precise":
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(item["w"])) + \
            f".{int(item['w'] % 1 * 1e6):06d}" + time.strftime("%z", time.localtime(item["w"]))
    elif fmt == "short-precise":
        stamp = time.strftime("%b %d %H:%M:%S", time.localtime(item["w"])) + f".{int(item['w'] % 1 * 1e6):06d}"
    elif fmt == "short-monotonic":
        stamp = f"[{item['t']:12.6f}]"
    else:
        stamp = time.strftime("%b %d %H:%M:%S", time.localtime(item["w"]))
    return f"{stamp} {who}: {message}"


def _parse_time(text: str) -> float | None:
    now = time.time()
    if text in ("now",):
        return now
    if text in ("today", "yesterday", "tomorrow"):
        midnight = time.mktime(time.localtime()[:3] + (0, 0, 0, 0, 0, -1))
        return midnight + {"today": 0, "yesterday": -86400, "tomorrow": 86400}[text]
    if text.startswith("@"):
        return float(text[1:])
    relative = re.fullmatch(r"([+-]?)(\d+)\s*(s|sec|m|min|h|hour|hours|d|day|days)( ago)?", text.strip())
    if relative:
        amount = int(relative.group(2)) * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600,
                                           "hours": 3600, "d": 86400, "day": 86400, "days": 86400}[relative.group(3)]
        return now - amount if relative.group(1) != "+" else now + amount
    for pattern in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return time.mktime(time.strptime(text, pattern))
        except ValueError:
            continue
    return None


def _priority_range(text: str) -> range:
    names = {name: i for i, name in enumerate(logs.PRIORITIES)}
    names.update({"warning": 4, "error": 3})
    low, _, high = text.partition("..")
    to_int = lambda v: int(v) if v.isdigit() else names.get(v, 7)  # noqa: E731
    if high:
        return range(to_int(low), to_int(high) + 1)
    return range(0, to_int(low) + 1)


def journalctl(args: list[str]) -> int:
    opts = {"units": [], "idents": [], "lines": None, "fmt": "short", "since": None, "until": None,
            "kernel": False, "grep": None, "prio": None, "reverse": False, "quiet": False, "follow": False,
            "no_hostname": False}
    i = 0
    while i < len(args):
        arg = args[i]
        key, eq, value = arg.partition("=")
        takes = {"-u": "units", "--unit": "units", "-t": "idents", "--identifier": "idents", "-n": "lines",
                 "--lines": "lines", "-o": "fmt", "--output": "fmt", "-S": "since", "--since": "since",
                 "-U": "until", "--until": "until", "-g": "grep", "--grep": "grep", "-p": "prio",
                 "--priority": "prio", "-b": "boot", "--boot": "boot"}
        name = key if key.startswith("--") else arg[:2]
        if name in takes:
            if key.startswith("--") and eq:
                pass
            elif not key.startswith("--") and len(arg) > 2:
                value = arg[2:]
            elif name in ("-b", "--boot") and (i + 1 >= len(args) or args[i + 1].startswith("-") and
                                               not re.fullmatch(r"-\d+", args[i + 1])):
                value = "0"
            else:
                i += 1
                value = args[i] if i < len(args) else ""
            field = takes[name]
            if field in ("units", "idents"):
                opts[field].append(value if field == "idents" or "." in value else value + ".service")
            elif field == "boot":
                if value not in ("0", "", state.boot_info().get("boot_id", "").replace("-", "")):
                    sys.stderr.write(f"Data from the specified boot ({value}) is not available: No such boot ID in journal\n")
                    return 1
            else:
                opts[field] = value
        elif arg in ("-k", "--dmesg"):
            opts["kernel"] = True
        elif arg in ("-r", "--reverse"):
            opts["reverse"] = True
        elif arg in ("-q", "--quiet"):
            opts["quiet"] = True
        elif arg in ("-f", "--follow"):
            opts["follow"] = True
        elif arg == "-e" or arg == "--pager-end":
            opts["lines"] = opts["lines"] or "1000"
        elif arg == "--no-hostname":
            opts["no_hostname"] = True
        elif arg == "--list-boots":
            info = state.boot_info()
            print(f" 0 {info.get('boot_id', '').replace('-', '')} {time.strftime('%a %Y-%m-%d %H:%M:%S %Z', time.localtime(info['booted_at']))}"
                  f"—{time.strftime('%a %Y-%m-%d %H:%M:%S %Z')}")
            return 0
        i += 1
    items = _select(opts)
    if opts["lines"] not in (None, "all", "+"):
        items = items[-int(opts["lines"]):] if int(opts["lines"]) else []
    if opts["reverse"]:
        items.reverse()
    host = "" if opts["no_hostname"] else None
    if not items and not opts["quiet"] and opts["fmt"] not in ("json", "cat"):
        print("-- No entries --")
    for item in items:
        print(format_entry(item, opts["fmt"], host))
    if opts["follow"]:
        seen = len(_select(opts))
        while True:
            time.sleep(0.5)
            now = _select(opts)
            for item in now[seen:]:
                print(format_entry(item, opts["fmt"], host), flush=True)
            seen = len(now)
    return 0


def _select(opts: dict) -> list[dict]:
    items = list(logs.kernel_entries())
    if not opts["kernel"]:
        items += logs.journal_entries()
        items.sort(key=lambda e: e["w"])
    since = _parse_time(opts["since"]) if opts["since"] else None
    until = _parse_time(opts["until"]) if opts["until"] else None
    prios = _priority_range(opts["prio"]) if opts["prio"] else None
    pattern = re.compile(opts["grep"], 0 if any(c.isupper() for c in opts["grep"]) else re.I) if opts["grep"] else None
    result = []
    for item in items:
        if opts["units"] and item.get("u") not in opts["units"]:
            continue
        if opts["idents"] and item.get("i", "kernel") not in opts["idents"]:
            continue
        if since and item["w"] < since or until and item["w"] > until:
            continue
        if prios and item.get("p", 6) not in prios:
            continue
        if pattern and not pattern.search(item["m"]):
            continue
        result.append(item)
    return result


def dmesg(args: list[str]) -> int:
    fmt, decode, levels, raw = "default", False, None, False
    clear_after = clear_only = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-T", "--ctime"):
            fmt = "ctime"
        elif arg in ("-t", "--notime"):
            fmt = "notime"
        elif arg.startswith("--time-format"):
            fmt = arg.partition("=")[2] or (args[i + 1] if i + 1 < len(args) else "")
            i += 0 if "=" in arg else 1
        elif arg in ("-x", "--decode"):
            decode = True
        elif arg in ("-r", "--raw"):
            raw = True
        elif arg in ("-l", "--level"):
            i += 1
            levels = set(args[i].split(",")) if i < len(args) else None
        elif arg.startswith("--level="):
            levels = set(arg.partition("=")[2].split(","))
        elif arg in ("-c", "--read-clear"):
            clear_after = True
        elif arg in ("-C", "--clear"):
            clear_only = True
        i += 1
    if not state.is_root():
        sys.stderr.write("dmesg: read kernel buffer failed: Operation not permitted\n")
        return 1
    cleared = float(state.read_text(CLEARED, "0") or 0)
    items = [e for e in logs.kernel_entries() if e["w"] > cleared]
    if clear_only or clear_after:
        state.write_text(CLEARED, f"{time.time()}\n")
        if clear_only:
            return 0
    out = []
    for item in items:
        level = logs.PRIORITIES[item.get("p", 6)]
        if levels and level not in levels:
            continue
        out.append(_dmesg_line(item, fmt, decode, raw, level))
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0


def _dmesg_line(item: dict, fmt: str, decode: bool, raw: bool, level: str) -> str:
    if fmt == "ctime":
        stamp = "[" + time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(item["w"])) + "] "
    elif fmt == "iso":
        local = time.localtime(item["w"])
        offset = time.strftime("%z", local)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", local) + f",{int(item['w'] % 1 * 1e6):06d}" + \
            f"{offset[:3]}:{offset[3:]} "
    elif fmt == "notime":
        stamp = ""
    else:
        stamp = f"[{item['t']:12.6f}] "
    prefix = f"<{item.get('p', 6)}>" if raw else (f"{'kern':<6}:{level:<6}: " if decode else "")
    first, *rest = item["m"].split("\n")
    return "\n".join([f"{prefix}{stamp}{first}"] + rest)


def main(argv: list[str]) -> int:
    tool, args = (argv[0], argv[1:]) if argv else ("journalctl", [])
    return dmesg(args) if tool == "dmesg" else journalctl(args)


if __name__ == "__main__":
    entry.run(main)
