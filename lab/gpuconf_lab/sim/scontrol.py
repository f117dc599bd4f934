"""``scontrol``: Slurm's node state as one controller (slurmctld) sees it, for the whole lab.

Real Slurm keeps node state in slurmctld, and ``scontrol`` on any node talks to it; so the
state here lives in the lab's shared directory (``fabric.directory()``: the one machine
directory bind-mounted into every node), not per node. ``scontrol`` run on a100-01 can
drain t4-01, and a drain survives the node's reboots, as it does with a real controller.

Files in ``<shared>/slurm/``:

* ``nodes.json``: per node ``state`` (IDLE), ``drain`` (bool), ``reason``, ``reason_user``,
  ``reason_time``. A node is known once ``scontrol`` ran on it (its slurmd registered) or
  it was named in an update from a node that is known.
* ``calls.jsonl``: every invocation, one JSON object a line (``node`` it ran on, ``argv``,
  ``rc``, ``time``), so tests can tell exactly which commands gpuconf issued.

Supported, in the real output formats of Slurm 23.02: ``show node[s] [NAME]`` (and ``-o``
for one line per node), ``update NodeName=NAME State=DRAIN|DOWN Reason=...``,
``State=RESUME|UNDRAIN``, ``-V``/``--version``. A drain or down without a reason is refused,
and a resume of a node that is not drained or down is an invalid state, as in real Slurm.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time

import entry
import fabric
import state

VERSION = "23.02.7"
ARCH = "x86_64"


def slurm_dir() -> str:
    return os.path.join(fabric.directory(), "slurm")


@contextlib.contextmanager
def controller():
    """The controller's state, locked for the whole command (nodes run scontrol concurrently)."""
    base = slurm_dir()
    os.makedirs(base, exist_ok=True)
    fd = os.open(os.path.join(base, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = os.path.join(base, "nodes.json")
        try:
            with open(path, encoding="utf-8") as handle:
                nodes = json.load(handle)
        except (OSError, ValueError):
            nodes = {}
        before = json.dumps(nodes, sort_keys=True)
        yield nodes
        if json.dumps(nodes, sort_keys=True) != before:
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(nodes, handle, indent=1, sort_keys=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
    finally:
        os.close(fd)


def record(argv: list[str], rc: int) -> None:
    line = json.dumps({"node": state.hostname(), "argv": argv, "rc": rc, "time": round(time.time(), 3)})
    with open(os.path.join(slurm_dir(), "calls.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def fresh_node() -> dict:
    return {"state": "IDLE", "drain": False, "reason": None, "reason_user": None, "reason_time": None}


def state_text(node: dict) -> str:
    text = node["state"]
    if node["drain"]:
        text += "+DRAIN"
    return text


def stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def show_lines(name: str, node: dict) -> list[str]:
    """The fields of ``scontrol show node``, grouped in lines as Slurm prints them."""
    count = len(state.profile().gpu_buses) if name == state.hostname() else 8
    boot = stamp(time.time() - state.uptime())
    lines = [
        f"NodeName={name} Arch={ARCH} CoresPerSocket=32 ",
        "CPUAlloc=0 CPUEfctv=128 CPUTot=128 CPULoad=0.01",
        "AvailableFeatures=(null)",
        "ActiveFeatures=(null)",
        f"Gres=gpu:{count}",
        f"NodeAddr={name} NodeHostName={name} Version={VERSION}",
        f"OS=Linux {state.running_kernel()} #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01) ",
        "RealMemory=1031000 AllocMem=0 FreeMem=1020000 Sockets=2 Boards=1",
        f"State={state_text(node)} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        "Partitions=gpu ",
        f"BootTime={boot} SlurmdStartTime={boot}",
        "LastBusyTime=None ResumeAfterTime=None",
        f"CfgTRES=cpu=128,mem=1031000M,billing=128,gres/gpu={count}",
        "AllocTRES=",
        "CapWatts=n/a",
        "CurrentWatts=0 AveWatts=0",
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    ]
    if node["reason"]:
        lines.append(f"Reason={node['reason']} [{node['reason_user']}@{stamp(node['reason_time'])}]")
    return lines


def cmd_show(args: list[str], one_line: bool) -> int:
    if not args or args[0] not in ("node", "nodes"):
        print(f"invalid entity:{args[0] if args else ''} for keyword:show", file=sys.stderr)
        return 1
    names = args[1].split(",") if len(args) > 1 else None
    with controller() as nodes:
        nodes.setdefault(state.hostname(), fresh_node())
        wanted = names or sorted(nodes)
        blocks = []
        for name in wanted:
            if name not in nodes:
                print(f"Node {name} not found")
                return 1
            lines = show_lines(name, nodes[name])
            blocks.append(" ".join(line.strip() for line in lines) if one_line
                          else "\n".join([lines[0]] + ["   " + line for line in lines[1:]]) + "\n")
    print("\n".join(blocks))
    return 0


def parse_pairs(args: list[str]) -> dict[str, str] | None:
    pairs = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep:
            print(f"scontrol: error: Invalid input: {arg}\nRequest aborted", file=sys.stderr)
            return None
        pairs[key.lower()] = value
    return pairs


def cmd_update(args: list[str]) -> int:
    pairs = parse_pairs(args)
    if pairs is None:
        return 1
    target = pairs.get("nodename") or pairs.get("node")
    if not target:
        print("No valid entity in update command\nInput line must include \"NodeName\", \"PartitionName\", ...",
              file=sys.stderr)
        return 1
    wanted = pairs.get("state", "").upper()
    reason = pairs.get("reason")
    with controller() as nodes:
        nodes.setdefault(state.hostname(), fresh_node())
        if target not in nodes:
            print("slurm_update error: Invalid node name specified", file=sys.stderr)
            return 1
        node = nodes[target]
        if wanted in ("DRAIN", "DOWN"):
            if not reason:
                print("You must specify a reason when DOWNING or DRAINING a node. Request denied",
                      file=sys.stderr)
                return 1
            node["drain"] = wanted == "DRAIN" or node["drain"]
            if wanted == "DOWN":
                node["state"] = "DOWN"
            user = os.environ.get("SUDO_USER") or ("root" if os.geteuid() == 0 else str(os.geteuid()))
            node.update(reason=reason, reason_user=user, reason_time=time.time())
        elif wanted in ("RESUME", "UNDRAIN"):
            if not node["drain"] and node["state"] != "DOWN":
                print("slurm_update error: Invalid node state specified", file=sys.stderr)
                return 1
            node.update(drain=False, reason=None, reason_user=None, reason_time=None)
            if wanted == "RESUME":
                node["state"] = "IDLE"
        elif wanted:
            print("slurm_update error: Invalid node state specified", file=sys.stderr)
            return 1
        elif reason is not None and node["reason"] is not None:
            node["reason"] = reason  # a reason alone updates it on a drained node
    return 0


def main(argv: list[str]) -> int:
    args = list(argv)
    one_line = False
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag in ("-V", "--version"):
            print(f"slurm {VERSION}")
            return 0
        if flag in ("-o", "--oneliner"):
            one_line = True
        elif flag not in ("-d", "--details", "-Q", "--quiet"):
            print(f"scontrol: unrecognized option '{flag}'", file=sys.stderr)
            return 1
    command, rest = (args[0].lower(), args[1:]) if args else ("", [])
    if command == "show":
        code = cmd_show(rest, one_line)
    elif command == "update":
        code = cmd_update(rest)
    else:
        print(f"invalid keyword: {command}", file=sys.stderr)
        code = 1
    record(argv, code)
    return code


if __name__ == "__main__":
    entry.run(main)
