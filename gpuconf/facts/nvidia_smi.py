"""nvidia-smi as a fact: always under a timeout that kills its process group.

A wedged GPU leaves nvidia-smi hanging in the kernel. A hang is reported as
`driver_unresponsive` (the fact is unavailable, the task `unknown`), never as a
pass and never as a hung run.

Every `--query-gpu` fact of a host's batch, whichever task or probe declares it, is one
nvidia-smi process: `query_fields()` facts merge (gpuconf/facts/merge.py) into one
`--query-gpu=<union of their fields> --format=csv,nounits`, and each fact reads its own
columns of the answer, header included. A field this driver refuses is dropped by the
remote runner (`drop_refused`), within the same timeout, and is then absent from every
fact's header: a fact reads it as not reported, never as a value. The runner knows nothing of
nvidia-smi: the request names the refusal (`REFUSED`); only the reruns are the runner's, since
each is another nvidia-smi process in the same round trip.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from gpuconf.facts.base import Fact, FactUnavailable, Merge, Output, Parsed, reply_output
from gpuconf.facts.nvidia import QueryCsv, detect_nvidia_smi_failure, parse_query_csv
from gpuconf.facts.wire import ExecRequest, Reply, Request

DRIVER_UNRESPONSIVE = "driver_unresponsive"
QUERY = "--query-gpu="
SOURCE = "nvidia-smi --query-gpu"
# How nvidia-smi refuses a whole query for one field this driver does not know (its first group)
REFUSED = r'^Field "([^"]*)" is not a valid field to query'


def query_request(fields: tuple[str, ...], timeout: float, renames: Mapping[str, str], most: int) -> ExecRequest:
    return {"op": "exec", "argv": ["nvidia-smi", QUERY + ",".join(fields), "--format=csv,nounits"],
            "timeout": timeout,
            "drop_refused": {"prefix": QUERY, "refused": REFUSED, "renames": dict(renames), "max": most}}


def _merged_request(requests: list[Request], fields: tuple[str, ...]) -> Request:
    """One query for every field: the longest of the facts' timeouts, all their renames, and
    room to drop as many refused fields as all of them together."""
    renames: dict[str, str] = {}
    timeout, most = 0.0, 0
    for request in requests:
        assert request["op"] == "exec" and "drop_refused" in request  # query_request made it
        renames.update(request["drop_refused"]["renames"])
        timeout, most = max(timeout, float(request.get("timeout", 10))), most + request["drop_refused"]["max"]
    return query_request(fields, timeout, renames, most)


def _columns_of(reply: Reply, fields: tuple[str, ...], renames: Mapping[str, str]) -> Reply:
    """A fact's own columns of a merged `--query-gpu` reply. Lines with as many cells as
    fields were sent (the header, the rows) are cut down to the fact's fields that came
    back (under an old name when renamed); other lines (nvidia-smi's messages) are kept
    whole, and a last line without a newline stays without one: cut short, never a value."""
    argv = [str(a) for a in reply.get("argv") or []]
    sent = next((a[len(QUERY):].split(",") for a in argv if a.startswith(QUERY)), None)
    if sent is None:
        return reply
    wanted = [sent.index(name) for name in (f if f in sent else renames.get(f, "") for f in fields) if name in sent]
    lines = str(reply.get("out", "")).split("\n")
    sliced = []
    for line in lines:
        cells = line.split(", ")
        sliced.append(", ".join(cells[i] for i in wanted) if line and len(cells) == len(sent) else line)
    return {**reply, "out": "\n".join(sliced)}


def query_fields(fields: tuple[str, ...], parse: Callable[[Output], Parsed], *, timeout: float = 10.0, key: str,
                 renames: Mapping[str, str] | None = None, most: int = 8) -> Fact[Parsed]:
    """`nvidia-smi --query-gpu=FIELDS --format=csv,nounits`, merged with every other such
    fact of the batch into one process. `renames` gives a field's old name, tried when
    this driver refuses the new one; `parse` reads the fact's own columns, header first."""
    old_names = dict(renames or {})
    return Fact(key, query_request(tuple(fields), timeout, old_names, most), lambda reply: parse(reply_output(reply)),
                Merge(SOURCE, tuple(fields), _merged_request,
                      lambda reply, parts: _columns_of(reply, parts, old_names)))


# Nodes of one model print the same rows for most fields (a serial or a UUID makes them differ):
# each distinct output is parsed once, and its hosts share the result, read-only.
_query_csv = functools.lru_cache(maxsize=64)(parse_query_csv)


def _parse(timeout: float) -> Callable[[Output], QueryCsv]:
    def parse(out: Output) -> QueryCsv:
        if out.timed_out:
            raise FactUnavailable(f"{DRIVER_UNRESPONSIVE}: nvidia-smi did not answer within "
                                  f"{out.timeout or timeout:g} s (its process group was killed)")
        if out.rc == 127:
            return QueryCsv((), (), {}, failure=detect_nvidia_smi_failure(
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"))
        result = _query_csv(out.stdout + ("\n" + out.stderr if out.rc else ""))
        if result.failure is None and out.rc != 0 and not result.rows:
            raise FactUnavailable(f"nvidia-smi failed (exit {out.rc}): {(out.stderr or out.stdout).strip()[:300]}")
        return result

    return parse


def gpu_query(*fields: str, timeout: float = 10.0) -> Fact[QueryCsv]:
    """The GPUs' `fields` (`--query-gpu`, with a header: a field the driver refuses is
    absent from the result's fields and rows)."""
    return query_fields(tuple(fields), _parse(timeout), timeout=timeout, key=f"nvsmi:{','.join(fields)}")


def not_installed(out: QueryCsv) -> bool:
    """nvidia-smi cannot talk to a driver: none is loaded yet, or the loaded one is not the
    installed user space's version (NVML's "Driver/library version mismatch", until a reboot)."""
    message = out.failure.message.lower() if out.failure is not None else ""
    return "communicate" in message or "version mismatch" in message
