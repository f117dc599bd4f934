"""``/usr/lib/gpuconf-lab/sim/fault KIND ARGS``: inject the faults tests and health probes need.

Hardware faults persist in ``/var/lib/gpuconf-lab/faults.json`` until cleared (a hot GPU, a
retrained PCIe link, dead NVLinks stay that way across reboots); driver-level ones live in
``/run`` and end at the next boot (a hung driver, volatile ECC counts, the dpkg lock holder).

    nvidia-smi-hang                 every nvidia-smi call blocks until killed
    xid CODE [--gpu N] [--pid P --name NAME]   one real-format NVRM Xid line in the kernel log;
                                    48 and 119 also leave the GPU needing a reset (nvidia-smi -r).
                                    NVLink5 144-150 print the unit, Fatal|Nonfatal, link, intrInfo
                                    and errorStatus that NVIDIA's decode reads: [--nonfatal]
                                    [--unit NAME] [--intrinfo 0xHEX] [--error-status 0xHEX] [--link L]
                                    (defaults: real lines, sim/xid_lines.py)
    temp C [--gpu N]                GPU temperature; above the slowdown threshold clocks throttle
    pcie-downgrade [--gpu N] [--gen G]         link trained at gen G (default 3) below the slot's
    ecc COUNT [--gpu N]             uncorrectable DRAM ECC errors (volatile, and in the aggregate)
    nvlink-down GPU [LINK ...]      NVLinks inactive (all of them without LINK)
    fabric-in-progress [--gpu N]    the GPU's NVLink fabric registration never completes
                                    (Fabric State "In Progress" whatever runs)
    imex-peer-down                  this node's IMEX daemon stops answering its peers: they see
                                    it as not connected (kept in the lab's shared fabric directory)
    util PCT [--gpu N]              GPU utilisation (a busy GPU: clocks up, link not idle)
    kernel-upgrade RELEASE          install kernel RELEASE; it runs after the next reboot,
                                    with its module tree and initramfs but no DKMS build
                                    (EL: RELEASE defaults to 5.14.0-427.16.1.el9_4.x86_64, on EL 10
                                    6.12.0-55.14.1.el10_0.x86_64, which also gets its BLS entry
                                    and its kernel rpms in the rpm database)
    secure-boot on|off              the UEFI Secure Boot setting; the next boot runs with it
                                    (unsigned modules then refuse to load; mokutil --sb-state)
    dpkg-lock                       a process holds the dpkg locks as apt would
    kmsg TEXT [--level warn]        one arbitrary kernel log line
    lockup                          a soft lockup in the NVIDIA ioctl path (and taint flag L)
    fallen-off-bus [--gpu N] [--no-xid]   the GPU falls off the bus: NVRM's lines (with Xid 79
                                    unless --no-xid), and nvidia-smi cannot get its handle any more
    recovery-action ACTION [--gpu N]      Xid 154 "GPU recovery action changed ..." and nvidia-smi's
                                    gpu_recovery_action; ACTION: reset, reboot, drain-p2p, drain-reset
    sxid CODE [--switch N] [--link L] [--non-fatal]   an NVSwitch SXid event in the kernel log
    gpu-process [--gpu N] [--name NAME]   a process holding the GPUs open (nvidia-smi -r refuses)
    truncated                       nvidia-smi --query-gpu output cut mid-field (no last newline)
    dcgm-fail TEST GPU              dcgmi diag fails TEST (software, pcie, memory ...) on GPU
    dcgmi-hang                      every dcgmi call blocks until killed
    clear [KIND]                    undo one kind, or every fault
--gpu takes an index, a comma list or "all"; the default is GPU 0. --sticky (xid, sxid,
fallen-off-bus, recovery-action, imex-peer-down) makes the fault come back at every boot and
after a reset of its GPU, like failed hardware, until cleared (sim/gpu_faults.py).
"""
from __future__ import annotations

import fcntl
import os
import signal
import sys

import el
import entry
import gpu
import gpu_faults
import identity
import imex
import kernels
import logs
import state
import sysfs
import xid_lines

# recovery-action ACTION -> (NVML value, the name the driver prints in Xid 154)
RECOVERY = {"reset": (1, "GPU Reset Required"), "reboot": (2, "Node Reboot Required"), "drain-p2p": (3, "Drain P2P"),
            "drain-reset": (4, "Drain and Reset")}
DPKG_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")
HOLDER = f"{state.RUN}/faults-dpkg-lock.pid"


FLAGS = ("--no-xid", "--sticky", "--non-fatal", "--nonfatal")


def _options(args: list[str]) -> tuple[list[str], dict]:
    positional, options = [], {}
    i = 0
    while i < len(args):
        if args[i] in FLAGS:
            options[args[i][2:]] = True
            i += 1
            continue
        if args[i].startswith("--") and i + 1 < len(args):
            options[args[i][2:]] = args[i + 1]
            i += 2
            continue
        positional.append(args[i])
        i += 1
    return positional, options


def _gpus(options: dict) -> list[int]:
    count = state.profile().gpu_count
    wanted = options.get("gpu", "0")
    if wanted == "all":
        return list(range(count))
    indexes = [int(part) for part in wanted.split(",")]
    for index in indexes:
        if not 0 <= index < count:
            raise SystemExit(f"fault: no GPU {index} on this node (it has {count})")
    return indexes


def _update(scope: str, key: str, change) -> None:
    target = gpu.PERSISTENT_FAULTS if scope == "persistent" else gpu.VOLATILE_FAULTS
    with state.locked("faults"):
        data = state.read_json(target, {}) or {}
        value = change(data.get(key))
        if value in (None, {}, False):
            data.pop(key, None)
        else:
            data[key] = value
        state.write_json(target, data)


def _per_gpu(scope: str, key: str, indexes: list[int], value) -> None:
    def change(current):
        current = dict(current or {})
        for index in indexes:
            current[str(index)] = value(current.get(str(index))) if callable(value) else value
        return current
    _update(scope, key, change)


def _describe(indexes: list[int]) -> str:
    buses = state.profile().gpu_buses
    return ", ".join(f"GPU {i} ({identity.gpu_bdf(buses[i])})" for i in indexes)


def xid(code: int, options: dict) -> None:
    buses = state.profile().gpu_buses
    for index in _gpus(options):
        pci = f"0000:{buses[index]:02x}:00"
        logs.kmsg(xid_lines.line(pci, code, options), 4)
        if code == 79:
            logs.kmsg(f"NVRM: GPU {pci}.0: GPU has fallen off the bus.", 3)
    if code in gpu_faults.RESET_XIDS:
        gpu_faults.needs_reset(_gpus(options))


def fallen_off_bus(options: dict, xid_line: bool) -> list[int]:
    """NVRM's lines for a GPU that fell off the bus (as in the real logs: the Xid 79 line, then
    the GPU's own line); until the next boot nvidia-smi has no handle for it."""
    indexes = _gpus(options)
    buses = state.profile().gpu_buses
    for index in indexes:
        pci = f"0000:{buses[index]:02x}:00"
        if xid_line:
            logs.kmsg(f"NVRM: Xid (PCI:{pci}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", 4)
        logs.kmsg(f"NVRM: GPU {pci}.0: GPU has fallen off the bus.", 3)
    _per_gpu("volatile", "lost", indexes, True)
    return indexes


def recovery_action(action: str, options: dict) -> list[int]:
    value, name = RECOVERY[action]
    indexes = _gpus(options)
    buses = state.profile().gpu_buses
    for index in indexes:
        logs.kmsg(f"NVRM: Xid (PCI:0000:{buses[index]:02x}:00): 154, GPU recovery action changed from 0x0 (None) "
                  f"to 0x{value:x} ({name})", 4)
    _per_gpu("volatile", "recovery_action", indexes, value)
    return indexes


def lockup() -> None:
    """What a GPU wedged in an ioctl leaves in the kernel log, and the taint it sets."""
    logs.kmsg("watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [python3:4242]", 0)
    for line in ("CPU: 3 PID: 4242 Comm: python3 Tainted: P           OE      6.1.0-18-amd64 #1 Debian 6.1.76-1",
                 "Call Trace:", " <TASK>", " _nv012345rm+0x1c/0x30 [nvidia]",
                 " nvidia_unlocked_ioctl+0x5a5/0x8f0 [nvidia]", " __x64_sys_ioctl+0x8d/0xd0",
                 " do_syscall_64+0x58/0xc0", " entry_SYSCALL_64_after_hwframe+0x64/0xce", " </TASK>"):
        logs.kmsg(line, 4)
    tainted = f"{state.RUN}/proc/tainted"
    value = int((state.read_text(tainted, "0") or "0").strip() or 0) | 16384   # L: soft lockup
    state.write_in_place(tainted, f"{value}\n")


def dpkg_lock() -> int:
    """Hold both dpkg locks with fcntl write locks, from a process named like apt's holder."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        os.waitpid(pid, 0)
        ready = os.read(read_end, 1)   # once the locks are held, or the holder died
        while os.read(read_end, 1):     # ... and the close-on-exec pipe closes at its exec
            pass
        os.close(read_end)
        if not ready:
            raise SystemExit("fault dpkg-lock: the lock holder could not take /var/lib/dpkg/lock-frontend")
        return 0
    os.close(read_end)
    os.setsid()
    if os.fork():
        os._exit(0)
    fds = []
    for lock in DPKG_LOCKS:
        fd = os.open(state.path(lock), os.O_RDWR | os.O_CREAT, 0o640)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        os.set_inheritable(fd, True)
        fds.append(fd)
    state.write_text(HOLDER, f"{os.getpid()}\n")
    os.write(write_end, b"1")       # write_end stays open: it closes on exec
    link = state.path(f"{state.RUN}/bin/unattended-upgr")
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if not os.path.lexists(link):
        os.symlink("/usr/bin/sleep", link)
    devnull = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(devnull, std)
    os.execv(link, ["/usr/bin/unattended-upgrade", "infinity"])
    return 0


def clear(kind: str | None) -> None:
    gpu_faults.clear_sticky(kind)
    if kind in (None, "gpu-process"):
        gpu_faults.stop_apps()
    if kind in (None, "dpkg-lock"):
        text = state.read_text(HOLDER)
        if text and text.strip().isdigit():
            try:
                os.kill(int(text.strip()), signal.SIGKILL)
            except ProcessLookupError:
                pass
        state.remove(HOLDER)
    keys = {"nvidia-smi-hang": [("volatile", "nvidia_smi_hang")], "temp": [("persistent", "temp")],
            "pcie-downgrade": [("persistent", "pcie")], "ecc": [("volatile", "ecc_volatile"), ("persistent", "ecc_aggregate")],
            "nvlink-down": [("persistent", "nvlink_down")],
            "fabric-in-progress": [("persistent", "fabric_in_progress")], "util": [("persistent", "util")],
            "fallen-off-bus": [("volatile", "lost")], "recovery-action": [("volatile", "recovery_action")],
            "truncated": [("volatile", "truncated")], "dcgm-fail": [("persistent", "dcgm_fail")],
            "dcgmi-hang": [("volatile", "dcgmi_hang")]}
    for name, entries in keys.items():
        if kind in (None, name):
            for scope, key in entries:
                _update(scope, key, lambda _current: None)
    if kind in (None, "pcie-downgrade"):
        sysfs.render_pci()
    if kind in (None, "imex-peer-down"):
        imex.set_answering(state.hostname(), True)
    if kind in (None, "secure-boot"):
        state.remove(state.FIRMWARE_JSON)   # back to the node's own setting, at the next boot


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(__doc__.split("\n\n", 1)[1])
        return 0 if argv else 2
    kind, (positional, options) = argv[0], _options(argv[1:])
    if options.get("sticky") and kind in gpu_faults.STICKY_KINDS:
        gpu_faults.record_sticky([arg for arg in argv if arg != "--sticky"])
    if kind == "nvidia-smi-hang":
        _update("volatile", "nvidia_smi_hang", lambda _c: True)
        print("fault nvidia-smi-hang: every nvidia-smi call now blocks until killed")
    elif kind == "xid" and positional:
        xid(int(positional[0]), options)
        print(f"fault xid: Xid {positional[0]} logged for {_describe(_gpus(options))}")
    elif kind == "temp" and positional:
        indexes = _gpus(options)
        _per_gpu("persistent", "temp", indexes, int(float(positional[0])))
        print(f"fault temp: {_describe(indexes)} at {positional[0]} C")
    elif kind == "pcie-downgrade":
        indexes, gen = _gpus(options), int(options.get("gen", positional[0] if positional else "3"))
        _per_gpu("persistent", "pcie", indexes, gen)
        for index in indexes:
            sysfs.set_link_gen(state.profile().gpu_buses[index], gen)
        print(f"fault pcie-downgrade: {_describe(indexes)} link at gen {gen} "
              f"(slot gen {state.profile().gpu.pcie_gen})")
    elif kind == "ecc" and positional:
        indexes, count = _gpus(options), int(positional[0])
        _per_gpu("volatile", "ecc_volatile", indexes, count)
        _per_gpu("persistent", "ecc_aggregate", indexes, lambda old: int(old or 0) + count)
        print(f"fault ecc: {count} uncorrectable ECC errors on {_describe(indexes)}")
    elif kind == "nvlink-down" and positional:
        index, links = int(positional[0]), positional[1:] or ["all"]
        _per_gpu("persistent", "nvlink_down", _gpus({"gpu": str(index)}), links)
        print(f"fault nvlink-down: {_describe([index])} links {' '.join(links)} inactive")
    elif kind == "fabric-in-progress":
        indexes = _gpus(options)
        _per_gpu("persistent", "fabric_in_progress", indexes, True)
        print(f"fault fabric-in-progress: {_describe(indexes)} stuck in fabric state In Progress")
    elif kind == "imex-peer-down":
        imex.set_answering(state.hostname(), False)
        print(f"fault imex-peer-down: the IMEX daemon of {state.hostname()} no longer answers its peers")
    elif kind == "util" and positional:
        indexes = _gpus(options)
        _per_gpu("persistent", "util", indexes, max(0, min(100, int(positional[0]))))
        print(f"fault util: {_describe(indexes)} at {positional[0]} %")
    elif kind == "kernel-upgrade" and (positional or el.is_el()):
        release = positional[0] if positional else el.upgrade_kernel()
        kernels.install_kernel(release)
        if el.is_el():
            el.register_kernel_rpms(release)
        print(f"fault kernel-upgrade: kernel {release} installed; it runs after the next reboot "
              "(no DKMS build for it)")
    elif kind == "secure-boot" and positional[:1] in (["on"], ["off"]):
        state.write_json(state.FIRMWARE_JSON, {"secure_boot": positional[0] == "on"})
        print(f"fault secure-boot: Secure Boot {positional[0]} in the firmware from the next boot")
    elif kind == "kmsg" and positional:
        level = logs.PRIORITIES.index(options.get("level", "warn"))
        logs.kmsg(" ".join(positional), level)
        print("fault kmsg: logged")
    elif kind == "lockup":
        lockup()
        print("fault lockup: soft lockup logged, kernel tainted (L)")
    elif kind == "fallen-off-bus":
        indexes = fallen_off_bus(options, not options.get("no-xid"))
        print(f"fault fallen-off-bus: {_describe(indexes)} fell off the bus")
    elif kind == "recovery-action" and positional and positional[0] in RECOVERY:
        indexes = recovery_action(positional[0], options)
        print(f"fault recovery-action: {_describe(indexes)} needs {RECOVERY[positional[0]][1]}")
    elif kind == "sxid" and positional:
        address = gpu_faults.sxid(int(positional[0]), int(options.get("switch", "0")), int(options.get("link", "0")),
                                  not options.get("non-fatal"))
        print(f"fault sxid: SXid {positional[0]} logged for NVSwitch {address}")
    elif kind == "gpu-process":
        indexes = _gpus(options)
        pid = gpu_faults.start_app(indexes, options.get("name", "python3"))
        print(f"fault gpu-process: {options.get('name', 'python3')} (pid {pid}) holds {_describe(indexes)}")
    elif kind in ("truncated", "dcgmi-hang"):
        _update("volatile", kind.replace("-", "_"), lambda _c: True)
        print(f"fault {kind}: on")
    elif kind == "dcgm-fail" and len(positional) == 2:
        test, index = positional[0], _gpus({"gpu": positional[1]})[0]
        _update("persistent", "dcgm_fail", lambda current: {**(current or {}),
                                                            test: sorted({*(current or {}).get(test, []), index})})
        print(f"fault dcgm-fail: dcgmi diag test {test} fails on {_describe([index])}")
    elif kind == "dpkg-lock":
        clear("dpkg-lock")
        dpkg_lock()
        print("fault dpkg-lock: /var/lib/dpkg/lock-frontend and /var/lib/dpkg/lock are held")
    elif kind == "clear":
        clear(positional[0] if positional else None)
        print(f"fault clear: {positional[0] if positional else 'every fault'} cleared")
    else:
        sys.stderr.write(f"fault: unknown fault or missing argument: {' '.join(argv)}\n")
        return 2
    return 0


if __name__ == "__main__":
    entry.run(main)
