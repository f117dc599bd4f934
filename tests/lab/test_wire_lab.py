"""The typed wire over real SSH: a lab node's runner (the joined parts, started through sudo as in
every run) answers each read a task can declare, and a write request, with the declared reply of
each op, and the facts parse those replies. (A fresh lab node has no driver: nvidia-smi's refused
fields are tested with a stand-in, tests/unit/tasks/health/test_readings.py.)"""
from __future__ import annotations

from gpuconf.connection.base import ConnectionSpec
from gpuconf.connection.lock import check_lock
from gpuconf.connection.ssh import SSHConnection
from gpuconf.facts import wire
from gpuconf.facts.base import FileState, command, file_glob, file_state, host_info, user_command
from gpuconf.facts.driver_stack import apt_offered
from gpuconf.facts.nvidia_smi import gpu_query
from gpuconf.inventory.hosts import load_inventory
from gpuconf.tasks.base import make_directory, remove, run, write_file
from gpuconf.tasks.imex import NVIDIA_IN_INITRAMFS
from gpuconf.tasks.initramfs import initramfs_fact
from gpuconf.tasks.services import unit_fact
from tests.unit.facts.test_wire import problems

NODE = "a100-01"


def test_a_lab_node_answers_each_op_with_its_declared_reply(lab):
    spec = ConnectionSpec.from_vars(NODE, load_inventory(str(lab.inventory_path)).host_vars(NODE))
    connection = SSHConnection(spec)
    connection.open()
    try:
        reads = [file_state("/etc/os-release", follow=True), file_glob(["/sys/bus/pci/devices/*/vendor"], dict), host_info(),
                 initramfs_fact(None), NVIDIA_IN_INITRAMFS, gpu_query("index", "name"),
                 unit_fact("ssh"), command(["uname", "-r"], lambda out: out.stdout.strip()),
                 user_command("echo hi", lambda out: out.stdout), apt_offered(["nvidia-utils-*"])]
        replies = connection.call([dict(f.request) for f in reads], True, 120, lock=check_lock())
        assert [problems(r, wire.REPLY_OF[f.request["op"]]) for f, r in zip(reads, replies)] == [[]] * len(reads)
        values = [fact.parse(reply) for fact, reply in zip(reads, replies)]
        assert isinstance(values[0], FileState) and "ID=" in (values[0].text or "")
        assert values[2]["hostname"] == NODE and values[8] == "hi\n"
        assert replies[3]["path"] == f"/boot/initrd.img-{values[7]}"   # {kernel}: the running release, put in there

        folder = "/tmp/gpuconf-wire-test"
        ops = [make_directory(folder, 0o700), write_file(f"{folder}/f", "x\n", mode=0o600), run(f"test -s {folder}/f"),
               remove(folder, recursive=True)]
        done = connection.call([dict(op.request) for op in ops], False, 60)
        assert [problems(r, wire.REPLY_OF[op.request["op"]]) for op, r in zip(ops, done)] == [[]] * len(ops)
        assert [r.get("ok", r.get("rc")) for r in done] == [True, True, 0, True]
    finally:
        connection.close()
