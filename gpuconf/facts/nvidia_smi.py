"""nvidia-smi as a fact: always under a timeout that kills its process group.

A wedged GPU leaves nvidia-smi hanging in the kernel. A hang is reported as
`driver_unresponsive` (the fact is unavailable, the task `unknown`), never as a
pass and never as a hung run.
"""
from __future__ import annotations

from gpuconf.facts.base import Fact, FactUnavailable, Output, command
from gpuconf.facts.nvidia import QueryCsv, detect_nvidia_smi_failure, parse_query_csv

DRIVER_UNRESPONSIVE = "driver_unresponsive"


def _parse(fields: tuple[str, ...], timeout: float):
    def parse(out: Output) -> QueryCsv:
        if out.timed_out:
            raise FactUnavailable(f"{DRIVER_UNRESPONSIVE}: nvidia-smi did not answer within {timeout:g} s "
                                  "(its process group was killed)")
        if out.rc == 127:
            return QueryCsv(fields, (), {}, failure=detect_nvidia_smi_failure(
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"))
        result = parse_query_csv(out.stdout + ("\n" + out.stderr if out.rc else ""), list(fields))
        if result.failure is None and out.rc != 0 and not result.rows:
            raise FactUnavailable(f"nvidia-smi failed (exit {out.rc}): {(out.stderr or out.stdout).strip()[:300]}")
        return result

    return parse


def gpu_query(*fields: str, timeout: float = 10.0) -> Fact:
    """`nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`."""
    names = ",".join(fields)
    return command(["nvidia-smi", f"--query-gpu={names}", "--format=csv,noheader,nounits"],
                   _parse(tuple(fields), timeout), timeout=timeout, key=f"nvsmi:{names}")


def not_installed(out: QueryCsv) -> bool:
    """nvidia-smi cannot talk to a driver: none is loaded yet, or the loaded one is not the
    installed user space's version (NVML's "Driver/library version mismatch", until a reboot)."""
    message = out.failure.message.lower() if out.failure is not None else ""
    return "communicate" in message or "version mismatch" in message
