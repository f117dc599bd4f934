"""gpuconf lab: a simulated GPU fleet that gpuconf reaches over real SSH, as it reaches real nodes.

A node is a private mount, UTS and pid namespace whose root is an overlay of the lab image on the
machine's own `/`, with a real OpenSSH sshd on a loopback address. Only the kernel, systemd and
the GPU are simulated (`gpuconf_lab.sim`); the runtime that makes nodes lives in `runtime`,
`init` (the node's PID 1), `image`, `node`, `fleet` (the `Lab` API) and `cli`.
"""
