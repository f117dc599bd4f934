"""The lab's BMCs: one Redfish service per node, on the lab's BMC addresses (loopback only), over
TLS with the lab's own CA, serving real captured payloads (mockups/, SOURCES.md) with the node's
firmware versions; it accepts a signed image, runs an update Task with progress, stages the
baseboard's images until a power cycle, and can be told to fail a Task or hang (docs/lab-bmc.md).
It runs on the machine, beside the nodes, as a real BMC sits beside its host."""
