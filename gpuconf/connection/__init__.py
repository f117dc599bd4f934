"""Connections: one per host per run, over SSH (strict host keys, ssh_config, jumps, become) or
local, each call one round trip to the remote runner (`remote/`: the Python sent to a host), served
by one runner per host and become (`served`); the host's run lock."""
import sys

if "paramiko" not in sys.modules and "invoke" not in sys.modules:
    # paramiko.config imports invoke, and with it unittest.mock and asyncio (~30 ms of every run),
    # only to evaluate ssh_config's `Match exec`, which gpuconf never reads. Hidden while paramiko
    # loads, so that paramiko records it as missing; any later `import invoke` works as usual.
    sys.modules["invoke"] = None  # type: ignore[assignment]
    try:
        import paramiko  # noqa: F401
    finally:
        del sys.modules["invoke"]
