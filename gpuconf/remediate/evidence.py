"""`gpuconf collect`: the evidence a GPU vendor asks for, gathered before a reset or a reboot erases it.

On the host, one shell script (built here from quoted parts) runs a fixed list of commands, each
under its own timeout and with no environment but PATH and LC_ALL (`env -i`): nothing of the
login session can reach the bundle. Each output is cut at its own size; the script then packs
them, with `commands.tsv` (each command's exit status, seconds and bytes), into one .tar.gz in
a private temporary directory (umask 077). The bundle comes back in chunks (base64, each an op
of the runner) into `<state dir>/bundles/.<name>.part`, which is renamed to
`<host>-<UTC time>.tar.gz` only once whole: no half-written bundle ever has the final name.
The host's copy is removed. The list is explicit: no environment, no keys, no shadow file, no
home directory; nvidia-bug-report.sh is NVIDIA's own and gathers the system's logs, as NVIDIA
support expects.
"""
from __future__ import annotations

import base64
import gzip
import os
import shlex
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuconf.errors import GpuconfError
from gpuconf.facts.evidence import parse_bug_report_header, parse_dmidecode, system_identity
from gpuconf.facts.wire import Reply, Request

if TYPE_CHECKING:
    from gpuconf.connection.base import Connection

MIB = 1024 * 1024
CHUNK = 720 * 1024  # raw bytes per op: its base64 stays under the runner's 1 MiB output
CHUNKS_PER_CALL = 8
MAX_BUNDLE = 64 * MIB  # the whole .tar.gz, checked on the host before it travels
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Item:
    """One file of the bundle: the first of `commands` that exists runs, for `timeout` seconds, its
    output cut at `cap` bytes. `when` is a shell test; when it fails the file says why it was skipped."""

    name: str
    commands: tuple[tuple[str, ...], ...]
    timeout: int
    cap: int
    when: str = ""
    skipped: str = ""


ITEMS = (
    Item("nvidia-bug-report.log.gz", (("nvidia-bug-report.sh", "--output-file", "{dir}/nvidia-bug-report.log"),),
         240, 48 * MIB),
    Item("nvidia-smi-q.txt", (("nvidia-smi", "-q"),), 60, 8 * MIB),
    Item("kernel.log", (("journalctl", "-k", "-b", "0", "-o", "short-monotonic", "--no-pager"), ("dmesg",)),
         30, 16 * MIB),
    Item("dmidecode.txt", (("dmidecode", "-t", "system", "-t", "baseboard", "-t", "bios"),), 15, MIB),
    Item("lspci-nvidia.txt", (("lspci", "-vvv", "-d", "10de:"),), 15, 4 * MIB),
    Item("dcgmi-diag-r1.json", (("dcgmi", "diag", "-r", "1", "-j"),), 180, 4 * MIB,
         when="systemctl is-active --quiet nvidia-dcgm || systemctl is-active --quiet dcgm",
         skipped="DCGM is not running (nvidia-dcgm)"),
    Item("fabricmanager.journal", (("journalctl", "-u", "nvidia-fabricmanager", "-b", "0", "--no-pager"),), 30,
         4 * MIB),
    Item("fabricmanager.log", (("tail", "-c", str(8 * MIB), "/var/log/fabricmanager.log"),), 15, 8 * MIB,
         when="test -f /var/log/fabricmanager.log", skipped="no /var/log/fabricmanager.log"),
    Item("nvidia-imex.journal", (("journalctl", "-u", "nvidia-imex", "-b", "0", "--no-pager"),), 30, 4 * MIB),
    Item("nvidia-imex.log", (("tail", "-c", str(8 * MIB), "/var/log/nvidia-imex.log"),), 15, 8 * MIB,
         when="test -f /var/log/nvidia-imex.log", skipped="no /var/log/nvidia-imex.log"),
    Item("packages.txt", (("dpkg-query", "-W", "-f", "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"),
                          ("rpm", "-qa", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}.%{ARCH}\\n")), 60, 8 * MIB),
)


def script_timeout(items: tuple[Item, ...] = ITEMS) -> int:
    """Every command in turn (and its kill's grace), then packing: what the host's script may take."""
    return sum(item.timeout + 5 for item in items) + 60


def item_script(item: Item) -> str:
    """The shell lines of one item: its output goes through `head -c`, so it is bounded while it is
    written; its status goes to a file (a pipeline's status is head's)."""
    out, status = f'"$d/{item.name}"', f'"$t/{item.name}.rc"'
    lines = [f"s=$(date +%s); echo 127 > {status}"]
    chain = []
    for argv in item.commands:
        # "{dir}" in an argument is the bundle's directory on the host ("$d", expanded by the shell)
        words = " ".join(shlex.quote(a).replace("'{dir}", "\"$d\"'") for a in argv)
        run = (f"{{ env -i PATH={PATH} LC_ALL=C timeout -k 5 {item.timeout} {words} 2>\"$t/{item.name}.err\"; "
               f"echo $? > {status}; }} | head -c {item.cap}")
        chain.append(f"if command -v {shlex.quote(argv[0])} >/dev/null 2>&1; then {run}")
    body = "; el".join(chain) + f"; else echo '{item.commands[0][0]}: not found' > \"$t/{item.name}.err\"; fi"
    if item.name.endswith(".gz"):  # the tool writes the file itself; cut it to its cap after
        body = body.replace(f" | head -c {item.cap}", " >/dev/null") + \
            f"; [ -f {out} ] && [ $(wc -c < {out}) -gt {item.cap} ] && truncate -s {item.cap} {out}"
    else:
        body = body.replace(f"| head -c {item.cap}", f"| head -c {item.cap} > {out}")
    if item.when:
        body = f"if {item.when}; then {body}; else echo {shlex.quote('skipped: ' + item.skipped)} > {out}; " \
               f"echo 0 > {status}; fi"
    lines.append(body)
    lines.append(f"printf '%s\\t%s\\t%s\\t%s\\n' {shlex.quote(item.name)} \"$(cat {status})\" "
                 f"\"$(( $(date +%s) - s ))\" \"$(wc -c < {out} 2>/dev/null || echo 0)\" >> \"$d/commands.tsv\"")
    return "\n".join(lines)


def host_script(max_bundle: int = MAX_BUNDLE, items: tuple[Item, ...] = ITEMS) -> str:
    """The script run on the host: prints `bundle PATH SIZE`, or `too_big SIZE` (nothing is kept then)."""
    head = ["set -u", "umask 077",
            # what an earlier collect cut off by a lost connection left (its read-back never came): an hour on
            "find /tmp -maxdepth 1 -name 'gpuconf-collect.*' -mmin +60 -exec rm -rf {} + 2>/dev/null",
            "w=$(mktemp -d /tmp/gpuconf-collect.XXXXXX) || exit 97",
            # killed (SIGHUP when the session goes, SIGTERM): nothing stays behind
            "trap 'rm -rf \"$w\" \"$w.tar.gz\"; exit 99' HUP INT TERM",
            'd="$w/bundle"; t="$w/status"; mkdir "$d" "$t" || exit 97',
            "printf 'file\\texit\\tseconds\\tbytes\\n' > \"$d/commands.tsv\""]
    tail = ['tar -czf "$w.tar.gz" -C "$w" bundle || { rm -rf "$w" "$w.tar.gz"; exit 98; }',
            'rm -rf "$w"; size=$(wc -c < "$w.tar.gz")',
            f'if [ "$size" -gt {max_bundle} ]; then rm -f "$w.tar.gz"; echo "too_big $size"; exit 0; fi',
            'echo "bundle $w.tar.gz $size"']
    return "\n".join([*head, *(item_script(item) for item in items), *tail]) + "\n"


@dataclass(frozen=True)
class Bundle:
    host: str
    path: Path
    size: int
    seconds: float
    system: dict[str, str]


def bundle_name(host: str, when: float) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in host)
    return f"{safe}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(when))}.tar.gz"


def _run(connection: Connection, commands: list[str], timeout: float) -> list[Reply]:
    ops: list[Request] = [{"op": "run", "cmd": cmd, "timeout": timeout, "check": False} for cmd in commands]
    return connection.call(ops, readonly=False, timeout=timeout * len(ops) + 30, become=True)


def _failed(host: str, what: str, reply: Reply) -> GpuconfError:
    said = (reply.get("error") or reply.get("err") or reply.get("out") or "").strip().splitlines()
    return GpuconfError(f"{host}: {what} (exit {reply.get('rc')}): {said[-1] if said else 'no message'}")


def collect(host: str, connection: Connection, bundles: Path, max_bundle: int = MAX_BUNDLE,
            items: tuple[Item, ...] = ITEMS) -> Bundle:
    """Build the bundle on `host`, bring it into `bundles`, remove the host's copy."""
    started = time.time()
    reply = _run(connection, [host_script(max_bundle, items)], script_timeout(items))[0]
    words = (reply.get("out") or "").split()
    if words[:1] == ["too_big"]:
        raise GpuconfError(f"{host}: the bundle is {int(words[1]) / MIB:.1f} MiB, over --max-size "
                           f"{max_bundle / MIB:g} MiB: nothing was kept (raise --max-size)")
    if reply.get("rc") != 0 or words[:1] != ["bundle"] or len(words) != 3 or not words[2].isdigit():
        raise _failed(host, "the collect script failed", reply)
    remote, size = words[1], int(words[2])
    bundles.mkdir(mode=0o700, parents=True, exist_ok=True)  # the logs of the fleet: the operator's alone
    name = bundle_name(host, started)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=bundles)  # 0600, its own
    partial = Path(temporary)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            offsets = list(range(0, size, CHUNK))
            for first in range(0, len(offsets), CHUNKS_PER_CALL):
                batch = offsets[first:first + CHUNKS_PER_CALL]
                reads = [f"dd if={shlex.quote(remote)} bs={CHUNK} skip={offset // CHUNK} count=1 2>/dev/null | "
                         "base64 -w0" for offset in batch]
                for answer in _run(connection, reads, 60):
                    if answer.get("rc") != 0:
                        raise _failed(host, "reading the bundle back failed", answer)
                    handle.write(base64.b64decode(answer.get("out") or ""))
            handle.flush()
            os.fsync(handle.fileno())
        if partial.stat().st_size != size:
            raise GpuconfError(f"{host}: the bundle came back with {partial.stat().st_size} of {size} bytes")
        final = publish(partial, bundles, name)
    finally:
        partial.unlink(missing_ok=True)
        _run(connection, [f"rm -f {shlex.quote(remote)}"], 30)
    return Bundle(host, final, size, round(time.time() - started, 1), identity(final))


def publish(partial: Path, bundles: Path, name: str) -> Path:
    """The whole bundle under its final name, never over another's: two collects of one host in the
    same second get `<host>-<time>.tar.gz` and `<host>-<time>-2.tar.gz` (a hard link fails on a name taken)."""
    stem = name.removesuffix(".tar.gz")
    for number in range(1, 1000):
        final = bundles / (name if number == 1 else f"{stem}-{number}.tar.gz")
        try:
            os.link(partial, final)
        except FileExistsError:
            continue
        return final
    raise GpuconfError(f"{bundles}: 999 bundles named {name} already: remove some")


def identity(path: Path) -> dict[str, str]:
    """The system the bundle is from (dmidecode's type 1), and the version of NVIDIA's bug report
    script that ran (its log's prologue), for the summary line."""
    found: dict[str, str] = {}
    try:
        with tarfile.open(path, "r:gz") as tar:
            member = tar.extractfile("bundle/dmidecode.txt")
            text = member.read(MIB).decode("utf-8", "replace") if member else ""
            found.update(system_identity(parse_dmidecode(text)))
            report = tar.extractfile("bundle/nvidia-bug-report.log.gz")
            if report is not None:
                with gzip.open(report) as log:
                    header = parse_bug_report_header(log.read(64 * 1024).decode("utf-8", "replace"))
                if header is not None and header.version:
                    found["bug_report"] = header.version
    except (OSError, EOFError, tarfile.TarError, KeyError):
        pass
    return found
