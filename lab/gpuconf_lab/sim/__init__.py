"""Simulators of the kernel, systemd and NVIDIA GPUs that run inside lab nodes.

The modules here are copied into each node image at ``/usr/lib/gpuconf-lab/sim/`` and run
there as plain scripts (``python3 -B -S kmod.py modprobe nvidia``): they import each other as
top-level modules and use the standard library only. ``install.py``, ``packages.py`` and
``elf.py`` run on the machine instead (image and apt repository builds). See
``docs/lab-contract.md`` for the paths the runtime and the simulators share.
"""
