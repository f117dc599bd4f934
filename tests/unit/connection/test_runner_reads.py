"""The remote runner runs a request's consecutive reads at the same time: each reply still belongs
to its own op, whatever order they finish in, and writes keep their order and stop rules."""
import sys

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.local import LocalConnection


def call(tmp_path, ops, readonly):
    connection = LocalConnection(ConnectionSpec(host="localhost", connection="local", python=sys.executable))
    return connection.call(ops, readonly, timeout=60)


def test_replies_belong_to_their_ops_when_reads_finish_out_of_order(tmp_path):
    (tmp_path / "f").write_text("data")
    ops = [{"op": "sh", "cmd": f"sleep 0.{9 - n}; echo out{n}", "timeout": 10} for n in range(6)]
    ops.insert(3, {"op": "stat", "path": str(tmp_path / "f")})
    replies = call(tmp_path, ops, readonly=True)
    assert [r["i"] for r in replies] == list(range(7))
    assert [r["out"].strip() for r in replies if "out" in r] == [f"out{n}" for n in range(6)]
    assert replies[3]["exists"] and replies[3]["size"] == 4


def test_a_write_in_a_check_request_is_refused_and_stops_the_rest(tmp_path):
    target = tmp_path / "x"
    ops = [{"op": "sh", "cmd": "echo a"}, {"op": "mkdir", "path": str(target)}, {"op": "sh", "cmd": "echo b"}]
    replies = call(tmp_path, ops, readonly=True)
    assert replies[0]["out"] == "a\n"
    assert "refused" in replies[1]["error"]
    assert replies[2].get("skipped") and not target.exists()


def test_reads_after_writes_see_the_writes_and_a_failed_run_skips_the_rest(tmp_path):
    target = tmp_path / "d"
    ops = [{"op": "mkdir", "path": str(target)}, {"op": "stat", "path": str(target)},
           {"op": "sh", "cmd": f"test -d {target} && echo there"},
           {"op": "run", "cmd": "exit 3"}, {"op": "sh", "cmd": "echo never"}]
    replies = call(tmp_path, ops, readonly=False)
    assert replies[1]["kind"] == "directory" and replies[2]["out"] == "there\n"
    assert replies[3]["rc"] == 3 and replies[4].get("skipped")


def test_a_write_into_a_missing_directory_says_so_and_leaves_nothing(tmp_path):
    import base64
    target = tmp_path / "missing" / "f.conf"
    replies = call(tmp_path, [{"op": "write", "path": str(target),
                               "content_b64": base64.b64encode(b"x\n").decode()}], readonly=False)
    assert f"its directory {target.parent} does not exist" in replies[0]["error"]
    assert list(tmp_path.iterdir()) == []
