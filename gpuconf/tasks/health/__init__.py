"""GPU health probes: read-only checks that never hang.

One task type per probe (`gpuconf tasks health_...`); the `gpu_health` role runs them
all. Each returns findings (ok / warning / failure, naming the GPU by index and bus id)
and changes nothing, so check and apply behave alike, apart from the opt-in remedies
(`remedy: true`, apply only) of persistence, fabric manager and nvidia_uvm.

Sources: sysfs and procfs where they suffice (they cannot hang); every nvidia-smi
field comes from one shared `--query-gpu` call per host per run
(`readings.gpu_readings`), under a timeout that kills its process group, so that a
wedged GPU is a `driver_unresponsive` failure finding on an `unknown` task.

The probes are registered by name in `gpuconf/tasks/registry.py` and imported only when a
playbook uses them, so this package imports none of its modules itself.
"""
