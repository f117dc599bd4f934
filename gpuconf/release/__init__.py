"""What this release of gpuconf is and carries: its version, the GPU library it ships (the roles and
playbooks, found in the installed package or in a checkout), and the node agent's bundle (the
controller's own gpuconf and its dependencies, built for a node's Python and copied there)."""
