"""The node actions of the recovery ladder that are not a reboot: a GPU reset and an IMEX restart,
each one script sent in one round trip, under the node's run lock.

A GPU reset (`nvidia-smi -r`) is refused while anything has the GPU open, so the script stops the
units that open `/dev/nvidia*` first (nvidia-persistenced, DCGM's nv-hostengine, Fabric Manager,
the IMEX daemon: those running), resets, and starts the same units again whatever the reset said.
Which GPUs go together (NVIDIA's Fabric Manager user guide: on an NVSwitch system all GPUs and
NVSwitches are reset together, with Fabric Manager stopped; docs/remediate.md): every GPU where
the node has NVSwitches or the action is `drain_and_reset`, else the GPUs the findings name.

The script writes its account to a file on the host and prints it at the end, so a controller
killed mid-reset leaves the host to finish it (units started again); the next run verifies. Around
each reset it writes a line to the kernel log (/dev/kmsg), `gpuconf: resetting GPU <bus>` and, once
the tool said the reset succeeded, `gpuconf: GPU <bus> was reset`: the Xid probe forgets the GPU's
Xids logged before a completed reset (gpuconf/facts/kernel.py `after_resets`), as NVSentinel's reset
job writes "GPU reset occurred" to syslog for its monitor (NVSentinel design 020, GPU reset).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from gpuconf.facts.nvidia.reset import parse_gpu_reset

# the units that open the GPUs' device files, in the order they are stopped (started in reverse)
HOLDERS = ("nvidia-persistenced", "nvidia-dcgm", "dcgm", "nvidia-fabricmanager", "nvidia-imex")
LOG = "/run/gpuconf-reset.log"
RESET_TIMEOUT = 180  # one nvidia-smi -r; the script's own timeout covers the units too
SCRIPT_TIMEOUT = RESET_TIMEOUT + 240
IMEX_UNIT = "nvidia-imex"
REFUSED = 255  # nvidia-smi -r's exit status when a process holds the GPU


def smi_bus(bus: str) -> str:
    """A PCI address as nvidia-smi prints it (00000000:3B:00.0) from the kernel's (0000:3b:00.0)."""
    match = re.fullmatch(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?", bus.strip())
    if not match:
        return bus
    domain, number, device, function = match.groups()
    return f"{int(domain or '0', 16):08X}:{number.upper()}:{device.upper()}.{function or '0'}"


def reset_script(buses: tuple[str, ...], every: bool) -> str:
    """The host's part of a GPU reset. `every`: all GPUs (and NVSwitches) together."""
    printed = [smi_bus(b) for b in buses]
    # only addresses go into the script; one that is not (it cannot be, from the parsers) resets all
    every = every or not all(re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]", b) for b in printed)
    targets = "" if every else " ".join(printed)
    holders = " ".join(HOLDERS)
    return f"""(
targets={shlex.quote(targets)}
stopped=""
for u in {holders}; do
  if systemctl is-active --quiet "$u" 2>/dev/null; then
    if systemctl stop "$u"; then echo "stopped $u"; stopped="$u $stopped"; else echo "stop-failed $u"; fi
  fi
done
nvswitch=""
[ -e /dev/nvidia-nvswitchctl ] && nvswitch=yes
case "$stopped" in *fabricmanager*) nvswitch=yes;; esac
if [ -n "$targets" ] && [ -n "$nvswitch" ]; then
  echo "group all: NVSwitch system"; targets=""
fi
rc=0
if [ -z "$targets" ]; then
  echo '<5>gpuconf: resetting all GPUs' >> /dev/kmsg
  timeout {RESET_TIMEOUT} nvidia-smi -r; rc=$?
  [ "$rc" = 0 ] && echo '<5>gpuconf: all GPUs were reset' >> /dev/kmsg
else
  for b in $targets; do
    echo "<5>gpuconf: resetting GPU $b" >> /dev/kmsg
    timeout {RESET_TIMEOUT} nvidia-smi -r -i "$b"; rc=$?
    [ "$rc" = 0 ] || break
    echo "<5>gpuconf: GPU $b was reset" >> /dev/kmsg
  done
fi
echo "reset-rc $rc"
for u in $stopped; do systemctl start "$u"; echo "started $u $?"; done
) >{LOG} 2>&1 </dev/null
cat {LOG}"""


def imex_script() -> str:
    """Restart the IMEX daemon (NVIDIA's IMEX guide: the recovery of a domain is a restart of its
    daemons); print its state as `nvidia-imex-ctl -q` says it once it answers, within 60 s."""
    return f"""systemctl restart {IMEX_UNIT} || exit $?
for i in $(seq 60); do
  state=$(timeout 10 nvidia-imex-ctl -q 2>&1) && [ "$state" = READY ] && break
  sleep 1
done
echo "imex-state $state\""""


@dataclass(frozen=True)
class Outcome:
    """What a node action did: `done` when it succeeded; `refused` when the tool would not (a
    process holds the GPU); `said` is the tool's own words, for the journal and the operator."""

    done: bool
    said: str
    refused: bool = False
    units: tuple[str, ...] = ()  # the units stopped and started again
    not_started: tuple[str, ...] = ()  # ... that did not start again


def parse_reset(out: str, rc: int | None) -> Outcome:
    """The script's account: `stopped U`, the tool's output, `reset-rc N`, `started U RC`."""
    stopped, not_started, said, code = [], [], [], None
    for line in out.splitlines():
        words = line.split()
        if words[:1] == ["stopped"] and len(words) == 2:
            stopped.append(words[1])
        elif words[:1] == ["started"] and len(words) == 3:
            if words[2] != "0":
                not_started.append(words[1])
        elif words[:1] == ["reset-rc"] and len(words) == 2 and words[1].isdigit():
            code = int(words[1])
        elif words[:1] == ["stop-failed"] or (line.strip() and not line.startswith("group all")):
            said.append(line.strip())
    if code is None:  # cut short: the script did not get as far as the reset's status
        return Outcome(False, f"the reset did not report back (exit {rc}): {' '.join(said[-2:]) or 'no output'}",
                       units=tuple(stopped), not_started=tuple(not_started))
    words = [line for line in said if not line.startswith("stop-failed")]
    text = "; ".join(words[:3]) or f"nvidia-smi -r exited {code}"
    refused = code == REFUSED or parse_gpu_reset("\n".join(words) + "\n").in_use  # either wording
    return Outcome(code == 0, text, refused, tuple(stopped), tuple(not_started))


def parse_imex(out: str, rc: int | None) -> Outcome:
    state = next((line.split(None, 1)[1] if " " in line else "" for line in out.splitlines()
                  if line.startswith("imex-state")), "")
    if rc != 0 or state != "READY":
        return Outcome(False, f"nvidia-imex after its restart: {state or out.strip()[-200:] or f'exit {rc}'}")
    return Outcome(True, "nvidia-imex restarted: READY", units=(IMEX_UNIT,))
