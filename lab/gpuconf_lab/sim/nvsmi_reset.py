"""``nvidia-smi -r`` / ``--gpu-reset`` [``-i ID``]: reset GPUs, or refuse as the real tool does.

The real tool refuses while any process has the device open: nvidia-persistenced, Fabric
Manager, DCGM's nv-hostengine, the IMEX daemon or a CUDA application. In the lab those are
the processes the ``nvidia`` module counts as its users (``modules.add_user``; the
``gpu-process`` fault starts an application). The refusal, word for word from public
captures (a leading empty line, the "could not be reset" list, the explanation; exit 255)::

    The following GPUs could not be reset:
      GPU 00000000:00:06.0: In use by another client

    1 device is currently being used by one or more other processes (e.g., Fabric Manager, ...

(ComputeCanada/puppet-magic_castle#387, mig-parted's log of nvidia-smi's output, 2024;
exit=255 with the same lines in NVIDIA/NVSentinel#1690). Success prints
"GPU 00000000:1A:00.0 was successfully reset." and exits 0 (NVIDIA/NVSentinel#1690,
NVIDIA/gpu-operator#118).

A reset clears what a reset clears (``gpu_faults.clear_after_reset``): a pending GPU-reset
recovery action (Xid 48, 119, ``recovery-action reset``) and volatile ECC counts. A GPU that
fell off the bus has no handle to reset (the tool's usual "Unable to determine the device
handle" line, exit 15), and a pending node reboot stays pending. Sticky faults of the reset
GPUs come back at once, as failed hardware does.
"""
from __future__ import annotations

import os
import sys

import gpu_faults
import modules
import state

IN_USE = ("1 device is currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
          "application, graphics application such as an X server, or a monitoring application such as another "
          "instance of nvidia-smi). Please first kill all processes using this device and all compute applications "
          "running in the system.")
REFUSED = 255
NO_HANDLE = 15
# NVML_ERROR_NO_PERMISSION's exit status; the wording follows the lab's -pm/-pl refusals
NO_PERMISSION = 4


def holders() -> list[int]:
    """Processes other than this one that hold the nvidia module's devices open."""
    entry = modules.get("nvidia") or {}
    return [pid for pid in entry.get("pids", []) if pid != os.getpid() and modules.alive(pid)]


def reset(gpus: list) -> int:
    if not state.is_root():
        print(f"Unable to reset GPU {gpus[0].bdf}: Insufficient Permissions\n"
              "Terminating early due to previous errors.")
        return NO_PERMISSION
    lost = [g for g in gpus if g.lost]
    if lost:
        sys.stdout.write("".join(f"Unable to determine the device handle for GPU {g.bdf}: Unknown Error\n"
                                 for g in lost))
        return NO_HANDLE
    if holders():
        listed = "".join(f"  GPU {g.bdf}: In use by another client\n" for g in gpus)
        sys.stdout.write(f"\nThe following GPUs could not be reset:\n{listed}\n{IN_USE}\n")
        return REFUSED
    indexes = [g.index for g in gpus]
    gpu_faults.clear_after_reset(indexes)
    for g in gpus:
        print(f"GPU {g.bdf} was successfully reset.")
    gpu_faults.reapply_sticky(indexes)
    return 0
