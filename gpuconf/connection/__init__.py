"""Connections: one per host per run, each call one round trip to the remote runner."""
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
