"""The pre-job gate (Slurm's Prolog and Epilog): a pure judge of what a node's GPUs and kernel
log say (`judge`) and its I/O on the node: the probes under a timeout, the gate's state file
under a lock, the drain through Slurm (`node`)."""
