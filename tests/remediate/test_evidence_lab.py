"""Acceptance (issue 28, item 3): `gpuconf collect` on a lab T4 node with the driver loaded
(tests/gate/gate-driver.yml) and DCGM running brings back one .tar.gz holding each file the issue names, made by the simulated
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

from gpuconf.facts.evidence import parse_bug_report_header, parse_dmidecode
from gpuconf.remediate.evidence import ITEMS
from gpuconf.remediate.history import History
from tests.lab_fixtures import start_lab

ROOT = Path(__file__).resolve().parents[2]
NODE = "t4-01"
DCGM = "apt-get install -y -q datacenter-gpu-manager-4-core=4.7.0-1 datacenter-gpu-manager-4-cuda13=4.7.0-1 " \
       ">/dev/null && systemctl start nvidia-dcgm"

PLANT = ("printf 'GPUCONF_LAB_TEST_SECRET=%s\\n' \"$S\" >> /etc/environment; "
         "printf 'gate-test:%s:19700:0:99999:7:::\\n' \"$S\" >> /etc/shadow; "
         "mkdir -p /root/.ssh; printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\\n%s\\n' \"$S\" > /root/.ssh/id_gate_test")


def test_the_bundle_holds_every_named_file_and_no_secret(tmp_path):
    import os
    lab = start_lab(f"{os.environ.get('GPUCONF_TEST_LAB', 'labtest')}-collect"[:31], {"t4": 1})
    try:
        converge = subprocess.run([sys.executable, "-m", "gpuconf", "apply", str(ROOT / "tests/gate/gate-driver.yml"),
                                   "-i", str(lab.inventory_path)], capture_output=True, text=True, cwd=ROOT,
                                  timeout=900)
        assert converge.returncode == 0, converge.stdout[-3000:] + converge.stderr[-2000:]
        rc, out, err = lab.exec(NODE, ["sh", "-c", DCGM])
        assert rc == 0, out + err
        secret = "gpuconf-lab-test-secret-" + secrets.token_hex(8)
        rc, _, err = lab.exec(NODE, ["sh", "-c", f"S={secret}; {PLANT}"])
        assert rc == 0, err
        done = subprocess.run([sys.executable, "-m", "gpuconf", "collect", NODE, "-i", str(lab.inventory_path),
                               "--state-dir", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=900,
                              env={"PATH": "/usr/bin:/bin", "GPUCONF_LAB_TEST_SECRET": secret})
        rc, shadow, _ = lab.exec(NODE, ["cat", "/etc/shadow"])
        assert secret in shadow  # planted, and still there while the bundle was made
    finally:
        lab.down()
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
    skipped = {name for name, text in files.items() if text.startswith(b"skipped: ")}
    assert skipped == {"fabricmanager.log", "nvidia-imex.log"}  # a T4 runs neither daemon

    report = gzip.decompress(files["nvidia-bug-report.log.gz"]).decode()
    header = parse_bug_report_header(report)
    assert header is not None and header.flags.startswith("--output-file")
    assert "Product Name" in files["nvidia-smi-q.txt"].decode()
    assert {r.title for r in parse_dmidecode(files["dmidecode.txt"].decode())} == \
        {"BIOS Information", "System Information", "Base Board Information"}
    assert "NVIDIA Corporation" in files["lspci-nvidia.txt"].decode()
    assert files["dcgmi-diag-r1.json"].lstrip().startswith(b"{")
    assert b"NVRM" in files["kernel.log"] and b"No entries" in files["fabricmanager.journal"]
    assert b"nvidia-utils-580" in files["packages.txt"]

    everything = b"".join(files.values()) + report.encode()
    assert secret.encode() not in everything
    assert b"BEGIN OPENSSH PRIVATE KEY" not in everything and b"gate-test:" not in everything
    with tarfile.open(fileobj=io.BytesIO(path.read_bytes()), mode="r:gz") as tar:
        assert all(not m.name.startswith("/") and ".." not in m.name for m in tar.getmembers())

    with History(tmp_path) as history:
        assert [entry[2] for entry in history.bundles(NODE)] == [str(path)]
