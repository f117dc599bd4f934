"""``reboot``, ``shutdown``, ``poweroff``, ``halt`` (and ``systemctl reboot``) inside a node.

A reboot is a request to the node's PID 1, the lab runtime's init (``SIGUSR1``, see
docs/lab-contract.md): it ends every process of the node, SSH sessions included, remounts
``/run`` and boots again. These tools never touch the machine: under ``GPUCONF_SIM_ROOT``
(tests) the request is only recorded, and a PID 1 that is not the runtime's ``init.py`` is refused.

Powering a node off is not simulated (``gpuconf lab down`` does that); the tools say so.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import entry
import logs
import state

REQUEST = f"{state.RUN}/reboot-requested"
SCHEDULE = f"{state.RUN}/shutdown-scheduled.json"


def request_reboot() -> int:
    if not state.is_root():
        sys.stderr.write("Call to Reboot failed: Interactive authentication required.\n")
        return 1
    logs.journal("System is rebooting.", "systemd-logind", 700)
    logs.systemd("Stopping Session of User root...")
    if state.TEST_MODE:
        state.write_text(REQUEST, f"{time.time()}\n")
        return 0
    if not _pid1_is_lab_init():
        sys.stderr.write("gpuconf lab: PID 1 is not a lab node's init; refusing to signal it (not inside a lab node).\n")
        return 1
    os.kill(1, signal.SIGUSR1)
    return 0


def _pid1_is_lab_init() -> bool:
    """The runtime's PID 1 is ``python3 ... init.py CONFIG``; the machine's never is."""
    try:
        with open("/proc/1/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    return any(os.path.basename(arg) == b"init.py" for arg in argv) and b"python" in os.path.basename(argv[0])


def _delay_seconds(when: str) -> int | None:
    if when == "now":
        return 0
    if when.startswith("+") and when[1:].isdigit():
        return int(when[1:]) * 60
    if ":" in when:
        hour, _, minute = when.partition(":")
        if hour.isdigit() and minute.isdigit():
            now = time.localtime()
            target = time.mktime(now[:3] + (int(hour), int(minute), 0, 0, 0, -1))
            if target <= time.time():
                target += 86400
            return int(target - time.time())
    return None


def shutdown(args: list[str]) -> int:
    flags = [a for a in args if a.startswith("-")]
    rest = [a for a in args if not a.startswith("-")]
    if "-c" in flags:
        scheduled = state.read_json(SCHEDULE)
        if scheduled:
            try:
                os.killpg(scheduled["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
            state.remove(SCHEDULE)
        return 0
    if not ({"-r", "--reboot"} & set(flags)):
        return poweroff()
    delay = _delay_seconds(rest[0] if rest else "+1")
    if delay is None:
        sys.stderr.write(f"Failed to parse time specification: {rest[0]}\n")
        return 1
    if delay == 0:
        return request_reboot()
    when = time.strftime("%a %Y-%m-%d %H:%M:%S %Z", time.localtime(time.time() + delay))
    script = state.path(f"{state.SIM_DIR}/power.py")
    sleeper = subprocess.Popen(["/bin/sh", "-c", f'sleep {delay}; exec /usr/bin/python3 -B -S "{script}" reboot'],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    state.write_json(SCHEDULE, {"pid": sleeper.pid, "at": time.time() + delay})
    print(f"Reboot scheduled for {when}, use 'shutdown -c' to cancel.")
    return 0


def poweroff() -> int:
    sys.stderr.write("gpuconf lab: powering a node off is not simulated; use 'gpuconf lab down'.\n")
    return 1


def main(argv: list[str]) -> int:
    tool, args = (argv[0], argv[1:]) if argv else ("reboot", [])
    if tool == "reboot":
        if "-p" in args or "--poweroff" in args:
            return poweroff()
        return request_reboot()
    if tool == "shutdown":
        return shutdown(args)
    return poweroff()


if __name__ == "__main__":
    entry.run(main)
