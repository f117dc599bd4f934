"""Issue 35, HIGH 3: the gate judges every line of this boot's kernel log that a completed GPU reset
(one gpuconf's recovery verifies) has not answered. Nothing a gate does moves what the next one
sees: two prologs starting together both see a new Xid, and a manual `gpuconf gate` changes nothing
on the node."""
from __future__ import annotations

import json
import threading

from gpuconf.cli.main import main
from gpuconf.gate import node as gate_node
from tests.unit.gate.test_judge import BOOT, signals

XID_74 = "[  812.345678] NVRM: Xid (PCI:0000:91:00): 74, pid=4242, name=python, NVLink: fatal error detected on link 3\n"
RESET = ("[  900.000001] gpuconf: resetting GPU 00000000:91:00.0\n"
         "[  903.000002] gpuconf: GPU 00000000:91:00.0 was reset\n")


def run_gate(monkeypatch, capsys, tmp_path, log: str) -> dict:
    monkeypatch.setattr(gate_node, "read_signals", lambda timeout: signals(log=log, boot=BOOT))
    rc = main(["gate", "--node", "n1", "--state", str(tmp_path / "gate.json")])
    verdict = json.loads(capsys.readouterr().out)
    assert rc == (1 if verdict["verdict"] in ("CRITICAL", "UNKNOWN") else 0)
    return verdict


def test_every_gate_of_this_boot_sees_the_xid(monkeypatch, capsys, tmp_path):
    first = run_gate(monkeypatch, capsys, tmp_path, XID_74)
    second = run_gate(monkeypatch, capsys, tmp_path, XID_74)  # the next job's prolog, or a manual gate
    assert first["verdict"] == second["verdict"] == "CRITICAL", (first, second)


def test_a_manual_gate_changes_nothing_on_the_node(monkeypatch, capsys, tmp_path):
    run_gate(monkeypatch, capsys, tmp_path, XID_74)
    assert list(tmp_path.iterdir()) == []


def test_two_prologs_at_once_both_fail(monkeypatch, tmp_path):
    monkeypatch.setattr(gate_node, "read_signals", lambda timeout: signals(log=XID_74, boot=BOOT))
    codes: list[int] = []
    barrier = threading.Barrier(2)

    def prolog() -> None:
        barrier.wait()
        codes.append(main(["gate", "--node", "n1", "--state", str(tmp_path / "gate.json")]))

    threads = [threading.Thread(target=prolog) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == [1, 1]


def test_a_completed_reset_of_the_gpu_answers_its_earlier_xid(monkeypatch, capsys, tmp_path):
    assert run_gate(monkeypatch, capsys, tmp_path, XID_74 + RESET)["verdict"] != "CRITICAL"
    again = XID_74 + RESET + XID_74.replace("812.345678", "950.000000")  # failed hardware fails again
    assert run_gate(monkeypatch, capsys, tmp_path, again)["verdict"] == "CRITICAL"
