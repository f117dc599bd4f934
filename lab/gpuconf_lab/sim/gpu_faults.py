"""The faults a GPU recovery acts on: what a reset clears, a process holding the GPUs, and
*sticky* faults that come back after every reboot, like failed hardware.

* Reset-recoverable: Xid 48 (double-bit ECC) and Xid 119 (GSP RPC timeout) leave the GPU
  asking for a reset (nvidia-smi's ``gpu_recovery_action`` is ``Reset``, NVML's
  GPU_RESET; NVIDIA's Xid catalog buckets both RESET_GPU), as does the ``recovery-action
  reset`` fault. ``nvidia-smi -r`` (``nvsmi_reset.py``) clears that state; it cannot clear a
  GPU that fell off the bus or a pending node reboot: those end with the boot.
* ``gpu-process [--gpu N] [--name NAME]``: a process with the GPUs' device files open (a CUDA
  application), which the nvidia module counts as a user and ``--query-compute-apps`` lists.
* ``sxid CODE [--switch N] [--link L] [--non-fatal]``: an NVSwitch SXid event as the
  nvidia-nvswitch driver logs it (``tests/fixtures/real/dmesg/sxid-20034-xid-79-nvswitch-gpud-readme.txt``):
  the line with the verdict, then its ``Severity ... Engine instance`` detail line.
* ``--sticky`` (on ``xid``, ``fallen-off-bus``, ``recovery-action``, ``imex-peer-down``): the
  fault is recorded in ``/var/lib`` and injected again at every boot, and again after a GPU
  reset of the GPUs it names; only ``fault clear`` ends it.
"""
from __future__ import annotations

import contextlib
import io
import os
import signal

import daemons
import gpu
import logs
import modules
import state

APPS = f"{state.RUN}/gpu-processes.json"
STICKY = "sticky"
RESET_XIDS = (48, 119)
# NVML recovery actions a GPU reset satisfies: 1 GPU reset, 3 drain P2P, 4 drain and reset
RESET_ACTIONS = (1, 3, 4)
STICKY_KINDS = ("xid", "sxid", "fallen-off-bus", "recovery-action", "imex-peer-down")


def needs_reset(indexes: list[int]) -> None:
    """What the driver records after a reset-recoverable Xid: recovery action GPU reset, unless
    the GPU already needs more (a node reboot)."""
    with state.locked("faults"):
        data = state.read_json(gpu.VOLATILE_FAULTS, {}) or {}
        actions = data.setdefault("recovery_action", {})
        for index in indexes:
            if int(actions.get(str(index), 0) or 0) in (0, 1):
                actions[str(index)] = 1
        state.write_json(gpu.VOLATILE_FAULTS, data)


def clear_after_reset(indexes: list[int]) -> None:
    """A GPU reset: the GPU's reset-class recovery action and volatile ECC counts go (row
    remapping is applied by the reset); a lost GPU and a pending reboot stay."""
    with state.locked("faults"):
        data = state.read_json(gpu.VOLATILE_FAULTS, {}) or {}
        for index in indexes:
            key = str(index)
            if int((data.get("recovery_action") or {}).get(key, 0) or 0) in RESET_ACTIONS:
                data["recovery_action"].pop(key)
            (data.get("ecc_volatile") or {}).pop(key, None)
        state.write_json(gpu.VOLATILE_FAULTS, {k: v for k, v in data.items() if v not in ({}, None)})


# the text after "Link N" in real SXid lines (gpud's captures and kmsg tests)
SXID_MESSAGES = {20034: "LTSSM Fault Up", 12028: "egress non-posted PRIV error", 24007: "sourcetrack timeout error",
                 20009: "RX Short Error Rate", 22013: "Minion Link DLREQ interrupt"}


def sxid(code: int, switch: int, link: int, fatal: bool) -> str:
    """Log one SXid event of NVSwitch ``switch``; returns its PCI address."""
    buses = state.profile().nvswitch_buses
    if not buses:
        raise SystemExit("fault sxid: this node has no NVSwitch")
    if not modules.is_loaded("nvidia"):
        raise SystemExit("fault sxid: the nvidia module (and its NVSwitch driver) is not loaded")
    if not 0 <= switch < len(buses):
        raise SystemExit(f"fault sxid: no NVSwitch {switch} on this node (it has {len(buses)})")
    address = f"0000:{buses[switch]:02x}:00.0"
    prefix = f"nvidia-nvswitch{switch}: SXid (PCI:{address}): {code}"
    logs.kmsg(f"{prefix}, {'Fatal' if fatal else 'Non-fatal'}, Link {link:02d} {SXID_MESSAGES.get(code, 'error')}", 3)
    logs.kmsg(f"{prefix}, Severity {1 if fatal else 0} Engine instance {link:02d} Sub-engine instance 00", 3)
    return address


def start_app(indexes: list[int], name: str) -> int:
    """Start a process that holds the GPUs ``indexes`` open until killed; returns its pid."""
    def ready(pid: int) -> None:
        modules.add_user("nvidia", pid)
        with state.locked("gpu-processes"):
            apps = state.read_json(APPS, {}) or {}
            apps[str(pid)] = {"name": name, "gpus": indexes}
            state.write_json(APPS, apps)

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:   # the app outlives this fault command, like a job started from a shell
        os.close(read_end)
        os.setsid()
        daemons.daemonize(name, None, lambda pid: (ready(pid), os.write(write_end, str(pid).encode())))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:   # closes when the app execs (close-on-exec)
        text = pipe.read().decode()
    os.waitpid(child, 0)
    return int(text) if text.isdigit() else 0


def apps() -> dict[int, dict]:
    """Live GPU processes: pid -> {"name", "gpus"}."""
    return {int(pid): info for pid, info in (state.read_json(APPS, {}) or {}).items() if modules.alive(int(pid))}


def stop_apps() -> None:
    for pid in apps():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    state.remove(APPS)


def record_sticky(argv: list[str]) -> None:
    with state.locked("faults"):
        data = state.read_json(gpu.PERSISTENT_FAULTS, {}) or {}
        entries = data.setdefault(STICKY, [])
        if argv not in entries:
            entries.append(argv)
        state.write_json(gpu.PERSISTENT_FAULTS, data)


def sticky() -> list[list[str]]:
    return list((state.read_json(gpu.PERSISTENT_FAULTS, {}) or {}).get(STICKY, []))


def is_sticky(kind: str) -> bool:
    return any(entry[:1] == [kind] for entry in sticky())


def clear_sticky(kind: str | None) -> None:
    with state.locked("faults"):
        data = state.read_json(gpu.PERSISTENT_FAULTS, {}) or {}
        kept = [entry for entry in data.get(STICKY, []) if kind is not None and entry[:1] != [kind]]
        if kept:
            data[STICKY] = kept
        else:
            data.pop(STICKY, None)
        state.write_json(gpu.PERSISTENT_FAULTS, data)


def _names_gpu(entry: list[str], indexes: list[int]) -> bool:
    wanted = entry[entry.index("--gpu") + 1] if "--gpu" in entry[:-1] else "0"
    return wanted == "all" or any(str(index) in wanted.split(",") for index in indexes)


def reapply_sticky(gpus: list[int] | None = None) -> None:
    """Inject every sticky fault again (at boot), or those naming one of ``gpus`` (after a
    reset of them): failed hardware fails again."""
    import fault  # the fault command's own functions; imported late (it imports this module)

    for entry in sticky():
        if gpus is not None and (entry[0] in ("imex-peer-down", "sxid") or not _names_gpu(entry, gpus)):
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            fault.main(entry)
