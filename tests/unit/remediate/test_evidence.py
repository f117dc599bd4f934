"""The evidence bundle's host script and transfer (gpuconf/remediate/evidence.py), run for real on this machine
through the local connection, with a list of harmless commands: each output is cut at its cap, a
command is killed at its timeout, a missing program and a skipped item say so, a bundle over the
size cap is refused, and the bundle arrives whole under its final name only."""
from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.local import LocalConnection
from gpuconf.errors import GpuconfError
from gpuconf.remediate.evidence import CHUNK, ITEMS, Item, bundle_name, collect, host_script, script_timeout

SMALL = (
    Item("yes.txt", (("yes", "gpuconf"),), 5, 4096),
    Item("slow.txt", (("sleep", "30"),), 1, 100),
    Item("missing.txt", (("no-such-program-gpuconf", "x"), ("also-not-here-gpuconf",)), 5, 100),
    Item("fallback.txt", (("no-such-program-gpuconf",), ("printf", "second")), 5, 100),
    Item("skipped.txt", (("true",),), 5, 100, when="test -e /no/such/path", skipped="not here"),
    Item("random.bin", (("head", "-c", str(3 * CHUNK), "/dev/urandom"),), 5, 3 * CHUNK),
)


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name.removeprefix("bundle/"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.fixture
def local():
    connection = LocalConnection(ConnectionSpec(host="localhost", connection="local"))
    yield connection
    connection.close()


def test_every_output_is_bounded_and_every_command_accounted_for(local, tmp_path):
    bundle = collect("node-1", local, tmp_path, items=SMALL)
    assert bundle.path.parent == tmp_path and bundle.path.name.startswith("node-1-") and bundle.size > 3 * CHUNK
    assert [p.name for p in tmp_path.iterdir()] == [bundle.path.name]  # no .part left
    files = members(bundle.path)
    assert files["yes.txt"] == (b"gpuconf\n" * 600)[:4096]
    assert files["slow.txt"] == b"" and files["random.bin"].__len__() == 3 * CHUNK
    assert files["fallback.txt"] == b"second" and files["skipped.txt"] == b"skipped: not here\n"
    table = [line.split("\t") for line in files["commands.tsv"].decode().splitlines()]
    status = {row[0]: row[1] for row in table[1:]}
    assert table[0] == ["file", "exit", "seconds", "bytes"]
    assert status == {"yes.txt": "141", "slow.txt": "124", "missing.txt": "127", "fallback.txt": "0",
                      "skipped.txt": "0", "random.bin": "0"}
    assert int(dict((row[0], row[2]) for row in table[1:])["slow.txt"]) <= 3


def test_a_bundle_over_the_cap_is_refused_and_nothing_is_kept(local, tmp_path):
    with pytest.raises(GpuconfError, match="over --max-size"):
        collect("node-1", local, tmp_path, max_bundle=CHUNK, items=SMALL)
    assert list(tmp_path.iterdir()) == []


def test_the_real_list_names_every_file_of_the_issue_and_is_bounded():
    names = [item.name for item in ITEMS]
    assert names[:5] == ["nvidia-bug-report.log.gz", "nvidia-smi-q.txt", "kernel.log", "dmidecode.txt",
                         "lspci-nvidia.txt"]
    assert {"dcgmi-diag-r1.json", "fabricmanager.log", "nvidia-imex.log", "packages.txt"} <= set(names)
    script = host_script()
    assert "env -i PATH=" in script and "umask 077" in script
    assert script_timeout() < 900 and sum(item.cap for item in ITEMS) < 200 * 1024 * 1024


def test_bundle_names_are_plain():
    assert bundle_name("gpu-01.example", 0) == "gpu-01.example-19700101T000000Z.tar.gz"
    assert bundle_name("a/b c", 0).startswith("a_b_c-")
