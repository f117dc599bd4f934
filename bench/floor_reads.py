"""The issue 17 floor: one shell line that reads what a no-op check reads, each class of state once.

    python bench/floor_reads.py REQUEST_DIR > reads.sh

Issue 17 measures gpuconf's no-op check against "a bare paramiko script that connects and runs one
command that reads the same classes of state once: the files, `dpkg-query`, one `nvidia-smi` query,
one `systemctl show`, and `dkms status`". This module writes that command. Its recipe is fixed here,
in bench/: `cat` of files, then the four programs, in that order. Only the lists come from gpuconf's
own first request (bench/capture_request.py saves it), so that the floor reads the same files, the
same GPU fields and the same units as the playbook does today:

  cat        every file the request reads with its content (its `stat` ops), the sysfs files of its
             content globs (the shell expands them), the host name and the online CPUs
  echo       the request's name-only globs (`/sys/class/infiniband/*`, `/boot/vmlinuz-*`): a shell
             builtin, no process
  dpkg-query the request's own argv (`-W` with its format)
  nvidia-smi the request's own `--query-gpu=` fields
  systemctl  the request's own `show` of its units
  dkms       `status`, as the request asks it

Left out, as the issue's floor leaves them out: the initramfs (cached on the node), `apt-cache`,
`mokutil`, `lsmod`, the role's `bash -lc` probe, and the ops that apply only on other distributions.
The line runs as the lab's login user, without sudo (every file it reads is readable without
root; gpuconf's request runs under `sudo -n` because it may write). A missing file is not an error (a no-op check reads optional files); a program that fails is: the
line exits non-zero and the floor's row shows it.
"""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

MARKER = "\n#--gpuconf-request--\n"
PROGRAMS = ("dpkg-query", "nvidia-smi", "systemctl", "dkms")
HOST_FILES = ("/proc/sys/kernel/hostname", "/sys/devices/system/cpu/online")  # the request's `host` op
# as gpuconf's remote runner sets them (builtins, no process): the C locale, and the sbin folders
# a login without root lacks (dkms is in /usr/sbin)
ENVIRONMENT = 'export LC_ALL=C PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"'


def request_ops(stdin: str) -> list[dict]:
    """The ops of the JSON request that follows the runner in a captured stdin."""
    if MARKER not in stdin:
        raise ValueError("not a captured gpuconf request: no request marker")
    return json.loads(stdin.split(MARKER, 1)[1])["ops"]


def reads_command(ops: list[dict]) -> str:
    files: list[str] = []
    names: list[str] = []
    programs: dict[str, list[str]] = {}
    for op in ops:
        kind = op["op"]
        if kind == "stat" and op.get("content"):
            files.append(shlex.quote(op["path"]))
        elif kind == "glob":
            patterns = [glob_word(p) for p in op["patterns"]]
            (files if op.get("what") == "content" else names).extend(patterns)
        elif kind == "host":
            files.extend(HOST_FILES)
        elif kind == "exec" and op["argv"][0] in PROGRAMS and "if_exists" not in op:
            programs.setdefault(op["argv"][0], op["argv"])
    missing = [p for p in PROGRAMS if p not in programs]
    if missing or not files:
        raise ValueError(f"the request reads no {', '.join(missing) or 'files'}: not an a100 no-op check")
    if programs["dkms"][1:2] != ["status"]:
        raise ValueError(f"unexpected dkms call in the request: {programs['dkms']}")
    line = [ENVIRONMENT, f"cat -- {' '.join(files)} 2>/dev/null"]
    if names:
        line.append(f"echo {' '.join(names)}")
    line.append(" && ".join(shlex.join(programs[p]) for p in PROGRAMS))
    return "; ".join(line)


def glob_word(pattern: str) -> str:
    """A glob pattern as a shell word the shell still expands (the lab's paths have no spaces)."""
    if any(c.isspace() or c in "'\"$`\\;&|<>()" for c in pattern):
        raise ValueError(f"a glob pattern the floor cannot pass to the shell as is: {pattern!r}")
    return pattern


def main() -> int:
    request = Path(sys.argv[1])
    print(reads_command(request_ops((request / "stdin").read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
