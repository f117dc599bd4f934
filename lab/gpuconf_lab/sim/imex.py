"""``nvidia-imex`` and ``nvidia-imex-ctl``: the IMEX daemon of GB200 NVL72 trays and its client.

The daemon (``nvidia-imex -c /etc/nvidia-imex/config.cfg``) reads ``config.cfg`` and the peer
list it names (``IMEX_NODE_CONFIG_FILE``, one IP per line), finds this node's own address in
it, and refuses to start when the loaded driver is not its own version. Its log follows the
real start-up log (``tests/fixtures/real/imex/imex-daemon-log-570-gh200-jpsnips.txt``);
the lines for a refusal are the lab's own wording, as no capture of one exists.

While it runs, the daemon holds ``imex-<node>.lock`` in the lab's shared fabric directory
(``sim/fabric.py``) and publishes its bind address in ``imex-<node>.json`` there, so every node
sees which peers run IMEX, the way the subnet managers are seen. The ``imex-peer-down`` fault
leaves ``imex-<node>.down`` there: that node's daemon stops answering its peers until it is
restarted (``systemctl restart nvidia-imex``: a new daemon answers), or for good with
``--sticky`` (it comes back at every start, like a broken node).

``nvidia-imex-ctl -N`` prints the domain in the real format
(``imex-ctl-N-gh200-2node-domain-up-jpsnips.txt``): a peer is ``C`` (connected) when its
daemon runs and answers, ``D`` when it runs but stopped answering, ``N`` when it never ran;
``-q`` prints the local daemon's state (``READY``).
"""
from __future__ import annotations

import fcntl
import json
import os
import sys
import time

import daemons
import entry
import fabric
import gpu
import gpu_faults
import modules
import state

CONFIG = "/etc/nvidia-imex/config.cfg"
NODES_CONFIG = "/etc/nvidia-imex/nodes_config.cfg"
LOG = "/var/log/nvidia-imex.log"
PORT = "50000"
LEGEND = """Connectivity Table Legend:
I - Invalid - Node wasn't reachable, no connection status available
N - Never Connected
R - Recovering - Connection was lost, but clean up has not yet been triggered.
D - Disconnected - Connection was lost, and clean up has been triggreed.
A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.
C - Connected - Ready for operation
"""
NO_DAEMON = "Connection to the IMEX command service failed: is nvidia-imex running? (gpuconf lab)"


def read_config(path: str) -> dict[str, str] | None:
    text = state.read_text(path)
    if text is None:
        return None
    config = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, _, value = line.partition("=")
            config[key.strip()] = value.strip()
    return config


def peer_addresses(config: dict[str, str]) -> list[str] | None:
    text = state.read_text(config.get("IMEX_NODE_CONFIG_FILE", NODES_CONFIG))
    if text is None:
        return None
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def own_address() -> str | None:
    """This node's address, from the lab's /etc/hosts (every node is listed there)."""
    for line in (state.read_text("/etc/hosts", "") or "").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and state.hostname() in words[1:]:
            return words[0]
    return None


def _shared(name: str, suffix: str) -> str:
    return os.path.join(fabric.directory(), f"imex-{name}.{suffix}")


def running(name: str) -> bool:
    """Whether node ``name``'s IMEX daemon holds its lock in the shared fabric directory."""
    try:
        fd = os.open(_shared(name, "lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def answering(name: str) -> bool:
    return not os.path.exists(_shared(name, "down"))


def set_answering(name: str, answers: bool) -> None:
    """The ``imex-peer-down`` fault (off: ``clear``)."""
    marker = _shared(name, "down")
    if answers:
        if os.path.exists(marker):
            os.unlink(marker)
        return
    os.makedirs(os.path.dirname(marker), exist_ok=True)
    with open(marker, "w", encoding="ascii") as handle:
        handle.write("IMEX daemon stopped answering its peers (fault imex-peer-down)\n")


def daemons_by_address() -> dict[str, str]:
    """Bind address -> node name, for every IMEX daemon running in the lab."""
    found = {}
    try:
        names = os.listdir(fabric.directory())
    except OSError:
        return found
    for entry_name in names:
        if entry_name.startswith("imex-") and entry_name.endswith(".json"):
            node = entry_name[5:-5]
            info = _read_shared(os.path.join(fabric.directory(), entry_name))
            if info.get("address") and running(node):
                found[info["address"]] = node
    return found


def _read_shared(real: str) -> dict:
    """A file of the shared fabric directory (a real path: it may lie outside GPUCONF_SIM_ROOT)."""
    try:
        with open(real, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def _write_shared(real: str, value: dict) -> None:
    tmp = f"{real}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    os.chmod(tmp, 0o644)
    os.replace(tmp, real)


def _log(handle, level: str, message: str) -> None:
    handle.write(f"{time.strftime('[%b %d %Y %H:%M:%S]')} [{level}] [tid {os.getpid()}] {message}\n")


def _fail(handle, message: str) -> int:
    _log(handle, "ERROR", message)
    sys.stderr.write(message + "\n")
    return 1


def daemon(version: str, args: list[str]) -> int:
    path = args[args.index("-c") + 1] if "-c" in args[:-1] else CONFIG
    config = read_config(path)
    if config is None:
        sys.stderr.write(f"Failed to open config file {path}\n")
        return 1
    log_path = state.path(config.get("LOG_FILE_NAME", LOG))
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    append = config.get("LOG_APPEND_TO_LOG", "1") == "1"
    with open(log_path, "a" if append else "w", encoding="utf-8") as log:
        now = time.time()
        log.write(f"IMEX Log initializing at: {time.strftime('%-m/%-d/%Y %H:%M:%S', time.localtime(now))}"
                  f".{int(now * 1000) % 1000:03d}\n")
        _log(log, "INFO", f"IMEX version {version} is running with the following configuration options\n")
        for label, key, default in (("Logging level", "LOG_LEVEL", "4"),
                                    ("Logging file name/path", "LOG_FILE_NAME", LOG),
                                    ("Append to log file", "LOG_APPEND_TO_LOG", "1"),
                                    ("Max Log file size", "LOG_FILE_MAX_SIZE", "1024"),
                                    ("Use Syslog file", "LOG_USE_SYSLOG", "0"),
                                    ("IMEX Library communication bind interface", "SERVER_IP", ""),
                                    ("IMEX library communication bind port", "SERVER_PORT", PORT)):
            unit = " (MBs)" if key == "LOG_FILE_MAX_SIZE" else ""
            _log(log, "INFO", f"{label} = {config.get(key, default)}{unit}\n")
        peers = peer_addresses(config)
        if peers is None:
            return _fail(log, f"Failed to open node config file {config.get('IMEX_NODE_CONFIG_FILE', NODES_CONFIG)}")
        own = own_address()
        if own not in peers:
            return _fail(log, f"This node's IP address {own} is not listed in the node config file")
        _log(log, "INFO", f"Identified this node as ID {peers.index(own)}, using bind IP of '{own}', and network "
                          "interface of eth0")
        driver = gpu.driver_version()
        if driver is None:
            return _fail(log, "NvGpu Library failed to open the NVIDIA GPU driver: is the nvidia module loaded?")
        if driver != version:
            return _fail(log, f"NvGpu Library version {version} does not match with GPU Driver version {driver}")
        _log(log, "INFO", "nvidia-imex persistence file /var/run/nvidia-imex/persist.dat does not exist.  "
                          "Assuming no previous importers.")
        _log(log, "INFO", "NvGpu Library version matched with GPU Driver version")
        _log(log, "INFO", f"Creating gRPC channels to all peers (nPeers = {len(peers)}).")
        _log(log, "INFO", "IMEX_WAIT_FOR_QUORUM != FULL, continuing initialization without waiting for "
                          "connections to all nodes.")
    name = state.hostname()
    os.makedirs(fabric.directory(), exist_ok=True)
    lock = os.open(_shared(name, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.stderr.write("Another instance of nvidia-imex is already running\n")
        return 1
    os.set_inheritable(lock, True)

    if not gpu_faults.is_sticky("imex-peer-down"):
        set_answering(name, True)   # a fresh daemon answers its peers: a restart recovers a wedged one

    def ready(pid: int) -> None:
        _write_shared(_shared(name, "json"), {"address": own, "version": version, "pid": pid})
        state.write_json(f"{state.RUN}/imex.json", {"pid": pid, "version": version, "address": own})
        modules.add_user("nvidia", pid)

    return daemons.daemonize("nvidia-imex", "/run/nvidia-imex/nvidia-imex.pid", ready)


def domain(peers: list[str]) -> tuple[list[str], list[list[str]], str]:
    """Each listed node's status, the connectivity matrix, and the domain state."""
    here = state.hostname()
    by_address = daemons_by_address()
    runs = [address in by_address for address in peers]
    answers = [ok and answering(by_address[address]) for ok, address in zip(runs, peers)]
    status = ["READY" if answers[i] or (runs[i] and by_address[a] == here) else "UNAVAILABLE"
              for i, a in enumerate(peers)]
    matrix = []
    for i in range(len(peers)):
        row = []
        for j in range(len(peers)):
            if runs[i] and runs[j] and (i == j or (answers[i] and answers[j])):
                row.append("C")
            elif runs[i] and runs[j]:
                row.append("D")     # both run: one of them stopped answering
            else:
                row.append("N")
        matrix.append(row)
    connected = all(cell == "C" for row in matrix for cell in row)
    return status, matrix, "UP" if connected else "DEGRADED"


def ctl(args: list[str]) -> int:
    path = args[args.index("-c") + 1] if "-c" in args[:-1] else CONFIG
    if "-N" not in args and "-q" not in args:
        sys.stderr.write("Usage: nvidia-imex-ctl [-c <nvidia-imex config.cfg path>] <-N|-q>\n")
        return 1
    if not running(state.hostname()):
        sys.stderr.write(NO_DAEMON + "\n")
        return 1
    if "-q" in args:
        print("READY")
        return 0
    config = read_config(path) or {}
    peers = peer_addresses(config) or []
    status, matrix, domain_state = domain(peers)
    now = time.time()
    stamp = f"{time.strftime('%-m/%-d/%Y %H:%M:%S', time.localtime(now))}.{int(now * 1000) % 1000:03d}"
    print(render_domain(stamp, peers, status, matrix, domain_state), end="")
    return 0


def render_domain(stamp: str, peers: list[str], status: list[str], matrix: list[list[str]], domain_state: str) -> str:
    """``nvidia-imex-ctl -N``'s text, laid out as the real capture is."""
    lines = [LEGEND, stamp, "Nodes:"]
    lines += [f"Node #{i:<4}- {address:<16}- {status[i]}" for i, address in enumerate(peers)]
    lines += ["", " Nodes From\\To" + "".join(f"{j:>3}" for j in range(len(peers)))]
    lines += [f"{i:>8}{'':8}" + "  ".join(row) for i, row in enumerate(matrix)]
    lines.append(f"Domain State: {domain_state}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    name, rest = (argv[0], argv[1:]) if argv else ("", [])
    if name == "daemon" and rest:
        return daemon(rest[0], rest[1:])
    if name == "ctl":
        return ctl(rest)
    sys.stderr.write("usage: imex.py daemon VERSION [-c CONFIG] | ctl -N|-q [-c CONFIG]\n")
    return 2


if __name__ == "__main__":
    entry.run(main)
