"""Acceptance (issue 28, item 3): `gpuconf collect` on the converged lab A100 node (driver, DCGM,
fabric manager) brings back one .tar.gz holding each file the issue names, made by the simulated
tools, and no secret: the lab's own test secret, planted in the node's environment file, its
shadow file and root's SSH key, is in no file of the extracted bundle (nor in the bug report's
gzip). The bundle's path goes into the history."""
from __future__ import annotations

import gzip
import io
import re
import secrets
import subprocess
import sys
import tarfile
from pathlib import Path

from gpuconf.collect import ITEMS
from gpuconf.facts.evidence import parse_bug_report_header, parse_dmidecode
from gpuconf.history import History
from tests.health.conftest import NAME, NODE, ROOT

PLANT = ("printf 'GPUCONF_LAB_TEST_SECRET=%s\\n' \"$S\" >> /etc/environment; "
         "printf 'gate-test:%s:19700:0:99999:7:::\\n' \"$S\" >> /etc/shadow; "
         "mkdir -p /root/.ssh; printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\\n%s\\n' \"$S\" > /root/.ssh/id_gate_test")
REMOVE = ("sed -i '/GPUCONF_LAB_TEST_SECRET/d' /etc/environment; sed -i '/^gate-test:/d' /etc/shadow; "
          "rm -f /root/.ssh/id_gate_test")


def test_the_bundle_holds_every_named_file_and_no_secret(node, tmp_path):
    secret = "gpuconf-lab-test-secret-" + secrets.token_hex(8)
    rc, _, err = node.sh(f"S={secret}; {PLANT}")
    assert rc == 0, err
    try:
        done = subprocess.run([sys.executable, "-m", "gpuconf", "collect", NODE, "-i", NAME, "--state-dir",
                               str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=900,
                              env={"PATH": "/usr/bin:/bin", "GPUCONF_LAB_TEST_SECRET": secret})
    finally:
        node.sh(REMOVE)
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.match(rf"{NODE}: (\S+\.tar\.gz) \(([\d.]+) MiB in ([\d.]+) s", done.stdout)
    assert found, done.stdout
    path = Path(found.group(1))
    assert path.parent == tmp_path / "bundles" and path.name.startswith(f"{NODE}-")
    print(f"\nbundle: {found.group(2)} MiB in {found.group(3)} s")  # the figure docs/slurm.md quotes

    with tarfile.open(path, "r:gz") as tar:
        files = {m.name.removeprefix("bundle/"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert set(files) == {item.name for item in ITEMS} | {"commands.tsv"}
    status = {row.split("\t")[0]: row.split("\t")[1] for row in files["commands.tsv"].decode().splitlines()[1:]}
    assert status == {item.name: "0" for item in ITEMS}, status

    report = gzip.decompress(files["nvidia-bug-report.log.gz"]).decode()
    header = parse_bug_report_header(report)
    assert header is not None and header.flags.startswith("--output-file")
    assert "Product Name" in files["nvidia-smi-q.txt"].decode()
    assert {r.title for r in parse_dmidecode(files["dmidecode.txt"].decode())} == \
        {"BIOS Information", "System Information", "Base Board Information"}
    assert files["lspci-nvidia.txt"].decode().count("NVIDIA Corporation") >= 8
    assert files["dcgmi-diag-r1.json"].lstrip().startswith(b"{")
    assert b"NVRM" in files["kernel.log"] and b"nvidia-fabricmanager" in files["fabricmanager.journal"]
    assert b"nvidia-utils-580" in files["packages.txt"]

    everything = b"".join(files.values()) + report.encode()
    assert secret.encode() not in everything
    assert b"BEGIN OPENSSH PRIVATE KEY" not in everything and b"gate-test:" not in everything
    with tarfile.open(fileobj=io.BytesIO(path.read_bytes()), mode="r:gz") as tar:
        assert all(not m.name.startswith("/") and ".." not in m.name for m in tar.getmembers())

    with History(tmp_path) as history:
        assert [entry[2] for entry in history.bundles(NODE)] == [str(path)]
