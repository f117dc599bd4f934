"""Facts of one source merge into one request at gather time (issue 17): every `--query-gpu`
fact of a batch is one nvidia-smi process, every unit's `systemctl show` one systemctl, and
each fact parses its own slice. The runner parts run for real on this machine (-c local),
with a stand-in nvidia-smi that refuses an unknown field as the real one does."""
import json
import os
import sys

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.local import LocalConnection
from gpuconf.engine.session import HostSession
from gpuconf.facts.base import simple_argv, user_command
from gpuconf.facts.merge import batches, reply_for
from gpuconf.facts.nvidia_smi import gpu_query
from gpuconf.tasks.health.fabric_state import fabric_query
from gpuconf.tasks.health.readings import HEALTH_FIELDS, gpu_readings
from gpuconf.tasks.services import unit_fact
from tests.real import read_real

# A stand-in nvidia-smi: refuses the fields in REFUSE as the real one does (exit 2, the whole
# query), else prints a header and two GPUs' rows; each run is logged. The machine's python3
# (a shebang cannot hold a checkout path with a space in it).
FAKE_SMI = """#!/usr/bin/python3
import os, sys
log, refuse = {log!r}, {refuse!r}
with open(log, "a") as handle:
    handle.write(" ".join(sys.argv[1:]) + "\\n")
fields = [a for a in sys.argv[1:] if a.startswith("--query-gpu=")][0][len("--query-gpu="):].split(",")
for name in fields:
    if name in refuse:
        print('Field "%s" is not a valid field to query.' % name)
        print()
        sys.exit(2)
values = {{"index": ["0", "1"], "driver_version": ["580.95.05"] * 2, "pci.bus_id": ["00000000:07:00.0", "00000000:0F:00.0"],
          "persistence_mode": ["Enabled", "Disabled"], "compute_cap": ["9.0"] * 2}}
print(", ".join(fields))
for gpu in range(2):
    print(", ".join(values.get(name, ["[N/A]"] * 2)[gpu] for name in fields))
"""


def session_with_fake_smi(tmp_path, monkeypatch, refuse=()):
    bin_dir, log = tmp_path / "bin", tmp_path / "smi.log"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(log=str(log), refuse=list(refuse)))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    connection = LocalConnection(ConnectionSpec.from_vars("localhost", {"python": sys.executable}))
    return HostSession("localhost", connection), log


def test_two_tasks_with_different_fields_and_the_probes_make_one_query():
    driver = gpu_query("index", "driver_version")
    persistence = gpu_query("index", "pci.bus_id", "persistence_mode", timeout=20)
    sent = batches([driver, persistence, gpu_readings(), fabric_query(10)])
    assert len(sent) == 1 and len(sent[0].facts) == 4
    argv = sent[0].request["argv"]
    fields = argv[1][len("--query-gpu="):].split(",")
    assert argv[0] == "nvidia-smi" and argv[2] == "--format=csv,nounits"
    assert fields[:4] == ["index", "driver_version", "pci.bus_id", "persistence_mode"]
    assert set(HEALTH_FIELDS) <= set(fields) and "fabric.cliqueId" in fields and len(fields) == len(set(fields))
    assert sent[0].request["timeout"] == 20  # the longest: one read serves every fact
    assert sent[0].request["drop_refused"]["renames"] == {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
    # alone, a fact sends its own query
    assert batches([driver])[0].request["argv"][1] == "--query-gpu=index,driver_version"


def test_each_fact_reads_its_own_columns_of_the_one_run(tmp_path, monkeypatch):
    session, log = session_with_fake_smi(tmp_path, monkeypatch)
    driver, persistence = gpu_query("index", "driver_version"), gpu_query("index", "pci.bus_id", "persistence_mode")
    session.fetch([driver, persistence])
    assert len(log.read_text().splitlines()) == 1
    assert session.get(driver).fields == ("index", "driver_version")
    assert [r["driver_version"] for r in session.get(driver).rows] == ["580.95.05", "580.95.05"]
    assert [(r["pci.bus_id"], r["persistence_mode"]) for r in session.get(persistence).rows] == \
        [("00000000:07:00.0", "Enabled"), ("00000000:0F:00.0", "Disabled")]
    session.fetch([driver, persistence])  # cached for the run: no second process
    assert len(log.read_text().splitlines()) == 1


def test_a_refused_field_is_retried_without_it_inside_the_one_query(tmp_path, monkeypatch):
    session, log = session_with_fake_smi(tmp_path, monkeypatch, refuse=("fabric.cliqueId",))
    driver, fabric = gpu_query("index", "driver_version"), fabric_query(10)
    session.fetch([driver, fabric])
    runs = log.read_text().splitlines()
    assert len(runs) == 2 and "fabric.cliqueId" in runs[0] and "fabric.cliqueId" not in runs[1]
    assert [r["driver_version"] for r in session.get(driver).rows] == ["580.95.05", "580.95.05"]
    report = session.get(fabric)
    assert [g.pci_address for g in report.gpus] == ["0000:07:00.0", "0000:0f:00.0"]
    assert [(g.architecture, g.fabric.clique_id) for g in report.gpus] == [("Hopper", None), ("Hopper", None)]


def test_output_cut_short_is_incomplete_never_a_value():
    driver, persistence = gpu_query("index", "driver_version"), gpu_query("index", "persistence_mode")
    [batch] = batches([driver, persistence])
    fields = batch.request["argv"][1][len("--query-gpu="):]
    whole = {"out": f"{fields.replace(',', ', ')}\n0, 580.95.05, Enabled\n1, 580.95.05, Ena", "rc": 0,
             "argv": batch.request["argv"]}
    for fact in (driver, persistence):
        parsed = fact.parse(reply_for(fact, batch, whole))
        assert len(parsed.rows) == 1 and parsed.incomplete  # GPU 1's row was cut: no value, and said so
    assert persistence.parse(reply_for(persistence, batch, whole)).rows[0] == {"index": 0, "persistence_mode": "Enabled"}


def test_a_hang_leaves_every_merged_fact_unavailable():
    driver, readings = gpu_query("index", "driver_version"), gpu_readings()
    [batch] = batches([driver, readings])
    hung = {"out": "", "err": "", "rc": -9, "timed_out": True, "timeout": 10.0, "argv": batch.request["argv"]}
    for fact in (driver, readings):
        try:
            fact.parse(reply_for(fact, batch, hung))
        except Exception as exc:  # noqa: BLE001 - FactUnavailable, named
            assert "driver_unresponsive" in str(exc)
        else:
            raise AssertionError("a hung nvidia-smi gave a value")


def test_every_unit_is_one_systemctl_show_cut_into_blocks():
    facts = [unit_fact(name) for name in ("nvidia-persistenced", "nvidia-dcgm", "opensm")]
    [batch] = batches(facts)
    assert batch.request["argv"][:5] == ["systemctl", "show", "nvidia-persistenced", "nvidia-dcgm", "opensm"]
    blocks = ["LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled",
              "LoadState=loaded\nActiveState=inactive\nSubState=dead\nUnitFileState=disabled",
              "LoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState="]
    reply = {"out": "\n\n".join(blocks) + "\n", "rc": 0, "argv": batch.request["argv"]}
    states = [fact.parse(reply_for(fact, batch, reply))[0] for fact in facts]
    assert [s["ActiveState"] for s in states] == ["active", "inactive", "inactive"]
    assert states[2]["LoadState"] == "not-found"
    short = dict(reply, out="\n\n".join(blocks[:2]) + "\n")  # a block missing: no unit is guessed
    assert all(fact.parse(reply_for(fact, batch, short))[0] == {} for fact in facts)


def test_a_simple_user_command_runs_without_sh_and_anything_else_through_it():
    assert simple_argv("bash -lc 'echo \"$LD_LIBRARY_PATH\"'") == ["bash", "-lc", 'echo "$LD_LIBRARY_PATH"']
    assert simple_argv("grep -q nouveau /etc/modprobe.d/blacklist.conf")[0] == "grep"
    for shell in ("echo $HOME", "a | b", "test -f /x && y", "FOO=1 cmd", "cd /tmp", "cmd \"a\"", "cmd a*",
                  "cmd 'a'b", "cmd ~/x", "exit 3", ""):
        assert simple_argv(shell) is None, shell
        assert "argv" not in user_command(shell, lambda out: out).request


def test_the_runner_runs_the_simple_command_as_sh_would(tmp_path):
    connection = LocalConnection(ConnectionSpec.from_vars("localhost", {"python": sys.executable}))
    texts = ["printf '%s|' 'a b' c", "sh -c 'exit 3'", "no-such-program-gpuconf x"]
    facts = [user_command(text, lambda out: (out.rc, out.stdout)) for text in texts]
    replies = connection.call([dict(f.request) for f in facts], True, 30)
    assert [f.parse(r) for f, r in zip(facts, replies, strict=True)][:2] == [(0, "a b|c|"), (3, "")]
    assert json.loads(json.dumps(replies[2]))["rc"] == 127  # not found: sh says so, as before


def test_a_real_h200_answer_cut_into_each_facts_columns():
    """nvidia-smi 590's own CSV (every field, with units), sliced for the fabric probe and a task."""
    text = read_real("nvidia-smi/query-gpu-csv-idle-nvidia-h200-590.48.01-nvidia-gpu-exporter.txt")
    header = [cell.split(" [")[0] for cell in text.splitlines()[0].split(", ")]
    fabric, driver = fabric_query(10), gpu_query("index", "driver_version")
    [batch] = batches([fabric, driver])
    reply = {"out": text, "rc": 0, "argv": ["nvidia-smi", "--query-gpu=" + ",".join(header), "--format=csv"]}
    report = fabric.parse(reply_for(fabric, batch, reply))
    assert [(g.architecture, g.fabric.state, g.fabric.status) for g in report.gpus] == \
        [("Hopper", "Completed", "Success")] * len(report.gpus) and report.gpus
    assert {r["driver_version"] for r in driver.parse(reply_for(driver, batch, reply)).rows} == {"590.48.01"}
