"""Where a profiled gpuconf run spent its CPU: py-spy's raw (collapsed) stacks, summed up.

    python bench/profile_summary.py PROFILE.txt [--rate 250]

py-spy samples every thread that is running (not waiting) `rate` times a second. Each sample is put
in the first area below whose rule matches any frame of its stack, so that, for instance, the
YAML parsing done while importing a module counts as imports. Also printed: the functions with
the most samples of their own (the leaf frame).
"""
from __future__ import annotations

import argparse
import re
from collections import Counter

AREAS = [
    ("imports (Python modules)", re.compile(r"_find_and_load|_call_with_frames_removed")),
    ("known_hosts parsing", re.compile(r"gpuconf/connection/hostkeys\.py|paramiko/hostkeys\.py")),
    ("private key loading", re.compile(r"paramiko/pkey\.py.*(from_private_key|_read_private_key)|load_private_key")),
    ("SSH connect: key exchange, host key, auth (paramiko)",
     re.compile(r"paramiko/(kex_|auth_handler|ed25519key|ecdsakey|rsakey|transport\.py:\d+\);_?(start_client|auth|"
                r"_negotiate|_parse_kex|_activate))|client\.py:\d+\);connect|connect \(paramiko/client")),
    ("SSH I/O: packets, ciphers, channels (paramiko)", re.compile(r"paramiko/")),
    ("cryptography (outside paramiko's frames)", re.compile(r"cryptography/")),
    ("YAML loading", re.compile(r"yaml/|gpuconf/yamlsrc\.py")),
    ("playbook loading and validation", re.compile(r"gpuconf/playbook/")),
    ("planning and templating", re.compile(r"gpuconf/templating\.py|gpuconf/engine/plancache\.py|jinja2/")),
    ("fact parsing", re.compile(r"gpuconf/facts/")),
    ("task checks", re.compile(r"gpuconf/tasks/")),
    ("reporting", re.compile(r"gpuconf/report/")),
    ("pydantic", re.compile(r"pydantic")),
    ("engine: sessions, results, runner", re.compile(r"gpuconf/engine/|gpuconf/connection/")),
    ("threads, queues, locks", re.compile(r"threading\.py|concurrent/futures|queue\.py")),
]


def parse(path: str) -> list[tuple[list[str], int]]:
    stacks = []
    for line in open(path):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        stacks.append((stack.split(";"), int(count)))
    return stacks


def area(frames: list[str]) -> str:
    joined = ";".join(frames)
    for name, rule in AREAS:
        if rule.search(joined):
            return name
    return "other"


def summarize(path: str, rate: float) -> str:
    stacks = parse(path)
    total = sum(count for _, count in stacks) or 1
    areas: Counter = Counter()
    leaves: Counter = Counter()
    for frames, count in stacks:
        areas[area(frames)] += count
        leaf = re.sub(r":\d+\)$", ")", frames[-1])  # one line per function, not per line number
        leaves[leaf] += count
    lines = [f"{total} samples at {rate:g}/s = {total / rate:.2f} s of CPU in Python threads", "",
             "| Area | CPU s | Share |", "|---|---:|---:|"]
    for name, count in areas.most_common():
        lines.append(f"| {name} | {count / rate:.2f} | {100 * count / total:.0f}% |")
    lines += ["", "| Function (own samples) | CPU s | Share |", "|---|---:|---:|"]
    for name, count in leaves.most_common(15):
        lines.append(f"| `{name}` | {count / rate:.2f} | {100 * count / total:.0f}% |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("profile")
    parser.add_argument("--rate", type=float, default=250)
    args = parser.parse_args()
    print(summarize(args.profile, args.rate))


if __name__ == "__main__":
    main()
