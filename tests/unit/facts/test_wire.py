"""The wire between controller and runner is declared once (gpuconf/facts/wire.py): the runner
dispatches exactly the declared op names, every request the product's builders make is one of
the declared requests, and every reply the real runner gives (run here, -c local) is the
declared reply of its op. The runner's parts stay Python 3.6 and join into one script."""
import ast
import base64
import gzip
import sys
import types
from pathlib import Path
from typing import Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

import gpuconf
from gpuconf.connection import base as connection_base
from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.local import LocalConnection
from gpuconf.connection.lock import check_lock
from gpuconf.connection.remote import dispatch
from gpuconf.facts import wire
from gpuconf.facts.base import command, file_glob, file_state, host_info, user_command
from gpuconf.facts.driver_stack import apt_offered
from gpuconf.facts.merge import batches
from gpuconf.facts.nvidia_smi import gpu_query
from gpuconf.tasks.base import make_directory, remove, run, symlink, write_file
from gpuconf.tasks.imex import NVIDIA_IN_INITRAMFS
from gpuconf.tasks.initramfs import initramfs_fact
from gpuconf.tasks.services import unit_fact
from tests.unit.connection.test_runner_reads_native import newc

RUNNER = Path(dispatch.__file__).parent


def problems(value, declared, where="$") -> list[str]:
    """What in `value` (a JSON value) the declared type does not allow."""
    if is_typeddict(declared):
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        hints = get_type_hints(declared)
        found = [f"{where}.{key}: not declared" for key in value if key not in hints]
        found += [f"{where}.{key}: missing" for key in declared.__required_keys__ if key not in value]
        for key in value.keys() & hints.keys():
            found += problems(value[key], hints[key], f"{where}.{key}")
        return found
    origin, args = get_origin(declared), get_args(declared)
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is none of {args}"]
    if origin in (Union, types.UnionType):
        return [] if any(not problems(value, arg, where) for arg in args) else [f"{where}: {value!r} is no {declared}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        return [p for n, item in enumerate(value) for p in problems(item, args[0], f"{where}[{n}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        return [p for key, item in value.items() for p in problems(key, args[0], where) + problems(item, args[1], where)]
    allowed = {float: (int, float), int: (int,), bool: (bool,), str: (str,), type(None): (type(None),)}[declared]
    if isinstance(value, bool) and declared is not bool or not isinstance(value, allowed):
        return [f"{where}: {value!r} is not {declared.__name__}"]
    return []


def declared_request(request) -> list[str]:
    if request.get("op") not in wire.REQUEST_OF:
        return [f"op {request.get('op')!r} is not declared"]
    return problems(request, wire.REQUEST_OF[request["op"]])


def test_the_checker_finds_what_is_not_declared():
    """The checks below can fail: an undeclared key, a missing one, a wrong type, a value
    outside a Literal, a bool where a number belongs."""
    assert declared_request({"op": "stat", "path": "/x", "extra": 1}) == ["$.extra: not declared"]
    assert declared_request({"op": "stat"}) == ["$.path: missing"]
    assert declared_request({"op": "glob", "patterns": ["/a"], "what": "size"})
    assert declared_request({"op": "exec", "argv": ["cat", 1]})
    assert declared_request({"op": "exec", "argv": ["cat"], "timeout": True})
    assert declared_request({"op": "format"}) == ["op 'format' is not declared"]
    assert problems({"rc": "0"}, wire.CommandReply) and problems({"files": {"a": 1}}, wire.GlobReply)


def test_the_runner_dispatches_exactly_the_declared_ops():
    assert set(dispatch.READS) == wire.READ_OPS
    assert set(dispatch.WRITES) == wire.WRITE_OPS
    assert set(dispatch.OPS) == set(get_args(wire.OpName)) == set(wire.REQUEST_OF) == set(wire.REPLY_OF)
    assert not wire.READ_OPS & wire.WRITE_OPS


def literal_ops(tree: ast.AST):
    """The `"op": NAME` entries of the dict literals in a module, and the op names it compares with."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "op" and isinstance(value, ast.Constant):
                    yield value.value


def test_every_op_the_product_writes_out_is_declared():
    """Requests built as plain dict literals (outside the typed builders, e.g. gpuconf/slurm_step.py)
    name declared ops too."""
    found: dict[str, set[str]] = {}
    for path in Path(gpuconf.__file__).parent.rglob("*.py"):
        if RUNNER in path.parents:
            continue
        for name in literal_ops(ast.parse(path.read_text(), str(path))):
            found.setdefault(name, set()).add(str(path))
    assert {"exec", "stat", "run", "write", "reboot", "announce_reboot", "cpio"} <= found.keys()  # the scan sees them
    assert {name: paths for name, paths in found.items() if name not in wire.REQUEST_OF} == {}


BUILT = [
    command(["cat", "/proc/cmdline"], str),
    command(["dmesg"], str, timeout=5, key="k", alternatives=[["journalctl", "-k"]], unless_exists="/a",
            if_exists="/b", if_os=["debian"], grep="xid", tail=3),
    apt_offered(["nvidia-*"]),
    user_command("echo hi", str),
    user_command("echo $HOME | tr a b", str),
    file_state("/etc/os-release"),
    file_state("/etc/x", with_content=False, follow=True),
    file_glob(["/sys/bus/pci/devices/*/vendor"], dict),
    file_glob(["/dev/nvidia*"], dict, what="link"),
    file_glob(["/boot/vmlinuz-*"], dict, what="name"),
    host_info(),
    gpu_query("index", "temperature.gpu"),
    unit_fact("nvidia-persistenced"),
    initramfs_fact(None),
    initramfs_fact("6.8.0-45-generic"),
    NVIDIA_IN_INITRAMFS,
]
OPS = [run("true"), run(["apt-mark", "hold", "x"], stdin="y\n", check=False), run("false", check=False),
       write_file("/etc/x", "data", mode=0o600, backup=True), write_file("/etc/y", b"\0"), make_directory("/d"),
       make_directory("/d", 0o755, "root", "root"), remove("/x"), remove("/d", recursive=True), symlink("/l", "/t")]


@pytest.mark.parametrize("request_", [f.request for f in BUILT] + [op.request for op in OPS],
                         ids=lambda r: r["op"])
def test_every_request_a_builder_makes_is_declared(request_):
    assert declared_request(request_) == []


def test_merged_requests_are_declared_too():
    merged = batches([gpu_query("index"), gpu_query("ecc.mode.current"), unit_fact("a"), unit_fact("b")])
    assert len(merged) == 2 and all(declared_request(batch.request) == [] for batch in merged)


def test_the_check_lock_is_declared():
    assert problems(check_lock(), wire.CheckLock) == []


def call(ops, readonly):
    connection = LocalConnection(ConnectionSpec(host="localhost", connection="local", python=sys.executable))
    return connection.call(ops, readonly, timeout=60)


def test_every_reply_of_the_runner_is_declared(tmp_path):
    """Each op, answered and failed, through the real runner: its reply is its op's declared
    reply, and a fact's parse reads it."""
    image = tmp_path / "initrd.img-1"
    image.write_bytes(gzip.compress(newc({"etc/modprobe.d/a.conf": b"blacklist nouveau\n"})))
    (tmp_path / "f").write_text("text\n")
    cpio = initramfs_fact("1")
    cpio.request["paths"] = [str(image)]
    reads = [file_state(str(tmp_path / "f")), file_state(str(tmp_path / "none")), file_glob([f"{tmp_path}/*"], dict),
             host_info(), cpio, initramfs_fact("no-such-kernel"), command(["cat", str(tmp_path / "f")], str),
             command(["cat", str(tmp_path / "none")], str), user_command("echo hi; exit 3", str)]
    read_ops = [dict(f.request) for f in reads] + [{"op": "exec", "argv": ["rm", "-f", str(tmp_path / "f")]}]
    lock = str(tmp_path / "run.lock")
    write_ops = [make_directory(str(tmp_path / "d")).request, write_file(str(tmp_path / "d" / "w"), "a").request,
                 write_file(str(tmp_path / "d" / "w"), "b", backup=True).request,
                 symlink(str(tmp_path / "l"), "w").request, remove(str(tmp_path / "l")).request,
                 {"op": "announce_reboot", "lock": lock, "timeout": 5},
                 {"op": "reboot", "cmd": "true", "delay": 0, "lock": lock, "timeout": 5},
                 run("echo out; exit 4").request, run("echo never").request]
    replies = call(read_ops, readonly=True) + call([*write_ops, {"op": "mkdir", "path": "/proc/no"}], readonly=False)
    sent = read_ops + write_ops + [{"op": "mkdir"}]
    assert [problems(reply, wire.REPLY_OF[op["op"]]) for op, reply in zip(sent, replies)] == [[]] * len(sent)
    # and the replies say what each op did: the forms above all occur
    assert "refused" in replies[len(reads)]["error"] and replies[-2].get("skipped") and replies[-3]["rc"] == 4
    assert replies[len(read_ops) + 2]["backup"] and replies[4]["files"] == {"etc/modprobe.d/a.conf": "blacklist nouveau\n"}
    values = [fact.parse(reply) for fact, reply in zip(reads, replies)]
    assert values[0].text == "text\n" and not values[1].exists and values[3]["cpus"] and values[5] is None


def test_the_runner_is_python_3_6_and_joins_into_one_script():
    for part in connection_base.PARTS:
        ast.parse((RUNNER / f"{part}.py").read_text(), feature_version=(3, 6))
    assert {path.stem for path in RUNNER.glob("*.py")} - {"__init__"} == set(connection_base.PARTS)
    script = connection_base.runner_script()
    assert "gpuconf.connection" not in script and "def main(request)" in script
    compile(script, "gpuconf-remote", "exec")


def test_the_wire_keeps_its_bytes():
    """The JSON of the common requests, as measured for the node-side cost (docs/performance.md):
    a typed builder sends the same keys in the same order as before."""
    assert file_state("/etc/os-release").request == {"op": "stat", "path": "/etc/os-release", "content": True,
                                                     "follow": False}
    assert list(apt_offered(["x"]).request) == ["op", "argv", "timeout", "if_os", "apt_architectures"]
    assert list(NVIDIA_IN_INITRAMFS.request) == ["op", "paths", "members", "names_only", "timeout"]
    assert list(write_file("/x", "y").request) == ["op", "path", "content_b64", "mode", "owner", "group", "backup"]
    assert base64.b64decode(write_file("/x", "y").request["content_b64"]) == b"y"
