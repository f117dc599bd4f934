"""Task types as tables: params plus facts in, expected changes and operations out.

Facts are served from the replies the remote runner would send, keyed by `Fact.key`,
and parsed by each fact's own parse function, into the `Facts` that check() gets: it
has no way to write or run anything. A fact a check reads must be declared by
`reads()`, or `Facts` refuses it, as it does in the engine.
"""
import base64

import pytest

from gpuconf.facts.base import FactUnavailable, file_state
from gpuconf.facts.gather import LSMOD, PROC_MODULES
from gpuconf.tasks.base import Facts, Refused, Unknown
from gpuconf.tasks.registry import TASK_TYPES, build_params
from gpuconf.templating.conditions import evaluate_when
from gpuconf.templating.render import Vars
from tests.platforms import platform_for
from tests.replies import parsed_replies


class Conditions:
    """The resolver of a task's conditions over plain variables (no template files)."""

    def __init__(self, variables: dict | None):
        self.vars = Vars(variables or {})

    def holds(self, condition: str) -> bool:
        return evaluate_when(condition, self.vars)


def served(replies: dict, reads: list, host: dict | None = None, reboot_pending: tuple = (),
           host_facts: frozenset[str] | None = None) -> Facts:
    """The facts a task sees: its replies, the host facts it declared (`host_facts`: reading
    another fails, as in a run) and the platform the host dict stands for."""
    return Facts(parsed_replies(reads, replies), reads, host or {}, reboot_pending, None, platform_for(host),
                 host_facts)
def stat(path, content=None, mode=0o644, owner="root", group="root", kind="file", exists=True, with_content=True):
    reply = {"exists": exists}
    if exists:
        reply.update(kind=kind, mode=mode, owner=owner, group=group)
        if content is not None:
            reply["content_b64"] = base64.b64encode(content.encode()).decode()
    return {file_state(path, with_content=with_content).key: reply}


def missing(path, with_content=True):
    return stat(path, exists=False, with_content=with_content)


def shell_reply(out="", rc=0, timed_out=False):
    return {"out": out, "err": "", "rc": rc, "timed_out": timed_out}


def op_text(op) -> str:
    r = op.request
    if r["op"] == "run":
        return r["cmd"]
    if r["op"] == "write":
        mode = "keep" if r["mode"] is None else f"{r['mode']:04o}"
        return f"write {r['path']} {mode} {base64.b64decode(r['content_b64']).decode()!r}"
    return f"{r['op']} {r['path']}"


def check(type_name, params, replies, variables=None, host=None, reboot_pending=()):
    task = TASK_TYPES[type_name]
    model = build_params(type_name, task.resolve(params, Conditions(variables)))
    return task.check(model, served(replies, task.reads(model), host, reboot_pending, task.host_facts))


def assert_changes(result, summaries, ops):
    assert [c.summary for c in result.changes] == summaries
    got = [op_text(op) for c in result.changes for op in c.ops]
    assert len(got) == len(ops), got
    for want, actual in zip(ops, got):  # each expected op: one substring, or a tuple of them
        for part in want if isinstance(want, tuple) else (want,):
            assert part in actual, f"{part!r} not in {actual!r}"


# -- file ---------------------------------------------------------------------
P = "/etc/gpu.conf"

FILE_CASES = [
    ("create", {"content": "hi\n"}, missing(P), [f"create {P}"], [f"write {P} 0644 'hi\\n'"]),
    ("create with mode", {"content": "x", "mode": "0600", "owner": "nvidia"}, missing(P), [f"create {P}"],
     [f"write {P} 0600 'x'"]),
    ("in sync", {"content": "hi\n", "mode": "0644"}, stat(P, "hi\n"), [], []),
    ("update keeps mode", {"content": "new\n"}, stat(P, "old\n", mode=0o640), [f"update content of {P}"],
     [f"write {P} keep 'new\\n'"]),
    ("mode only", {"content": "hi\n", "mode": 0o600}, stat(P, "hi\n"), [f"{P}: mode 0644 -> 0600"],
     [f"chmod 0600 {P}"]),
    ("owner only", {"owner": "nvidia"}, stat(P, "hi\n"), [f"{P}: owner root:root -> nvidia:root"],
     [f"chown nvidia:root {P}"]),
    ("sticky and setgid from YAML octal", {"mode": 0o3775}, stat(P, "hi\n", mode=0o775),
     [f"{P}: mode 0775 -> 3775"], [f"chmod 3775 {P}"]),
    ("group only", {"group": "video", "mode": "644"}, stat(P, "hi\n"), [f"{P}: owner root:root -> root:video"],
     [f"chown root:video {P}"]),
    ("absent", {"state": "absent"}, stat(P, "hi\n"), [f"remove {P}"], [f"remove {P}"]),
    ("already absent", {"state": "absent"}, missing(P), [], []),
]


@pytest.mark.parametrize("label, params, replies, summaries, ops", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_file(label, params, replies, summaries, ops):
    result = check("file", {"path": P, **params}, replies)
    assert_changes(result, summaries, ops)
    if not summaries:
        assert result.message  # in sync says why


def test_file_update_has_a_unified_diff():
    result = check("file", {"path": P, "content": "a\nnew\n"}, stat(P, "a\nold\n"))
    diff = result.changes[0].diff
    assert f"--- {P} (before)" in diff and "-old\n" in diff and "+new\n" in diff and " a\n" in diff


def test_file_refuses_to_replace_a_directory():
    with pytest.raises(Refused, match="is a directory"):
        check("file", {"path": P, "content": "x"}, stat(P, kind="directory"))


# -- line ---------------------------------------------------------------------
S = "/etc/ssh/sshd_config"
ROOT = {"regexp": "^#?PermitRootLogin", "line": "PermitRootLogin no"}

LINE_CASES = [
    ("regexp replaces the last match", ROOT, "a\n#PermitRootLogin yes\nb\n", "a\nPermitRootLogin no\nb\n"),
    ("regexp no match appends", ROOT, "a\n", "a\nPermitRootLogin no\n"),
    ("appends after a missing newline", {"line": "x=1"}, "a", "a\nx=1\n"),
    ("present already", ROOT, "PermitRootLogin no\n", None),
    ("absent by regexp removes every match", {"regexp": "^blacklist nouveau", "state": "absent"},
     "a\nblacklist nouveau\nb\nblacklist nouveau\n", "a\nb\n"),
    ("absent by line", {"line": "x=1", "state": "absent"}, "x=1\ny\n", "y\n"),
    ("absent already", {"line": "x=1", "state": "absent"}, "y\n", None),
    # a line of several lines (fuzz:class6-lineinfile-several-lines): written as it is, as Ansible writes it
    ("several lines appended as they are", {"line": "a\nb"}, "x\n", "x\na\nb\n"),
    ("several lines ending in a break", {"line": "h [1]\n"}, "x\n", "x\nh [1]\n\n"),
    ("several lines replace a regexp's match", {"line": "x\ny", "regexp": "^fir"}, "first\n", "x\ny\n"),
    ("several lines there in a row", {"line": "a\nb"}, "a\nb\nc\n", None),
]


@pytest.mark.parametrize("label, params, before, after", LINE_CASES, ids=[c[0] for c in LINE_CASES])
def test_line(label, params, before, after):
    result = check("line", {"path": S, **params}, stat(S, before))
    if after is None:
        assert result.changes == [] and result.message
        return
    verb = "add line to" if params.get("state", "present") == "present" else "remove line from"
    assert_changes(result, [f"{verb} {S}"], [f"write {S} keep {after!r}"])
    assert check("line", {"path": S, **params}, stat(S, after)).changes == []  # the written file is in sync


def test_line_creates_a_missing_file_unless_told_not_to():
    assert_changes(check("line", {"path": S, "line": "x"}, missing(S)), [f"create {S} with the line"],
                   [f"write {S} 0644 'x\\n'"])
    assert check("line", {"path": S, "line": "x", "state": "absent"}, missing(S)).changes == []
    with pytest.raises(Refused, match="create is false"):
        check("line", {"path": S, "line": "x", "create": False}, missing(S))


# -- package ------------------------------------------------------------------
D = "nvidia-driver-550"


def dpkg(*lines):
    return shell_reply("".join(f"{line}\n" for line in lines))


def package(params, out):
    params = {"name": D, **params}
    fact = TASK_TYPES["package"].reads(build_params("package", params))[0]
    return check("package", params, {fact.key: out})


PACKAGE_CASES = [
    ("install", {}, dpkg(), [f"install {D}"], [("apt-get install", f"-- {D}")]),
    ("install, known but not installed", {}, dpkg(f"{D}\t\tun "), [f"install {D}"], [f"-- {D}"]),
    ("exact version", {"version": "550.54.15-1"}, dpkg(), [f"install {D} 550.54.15-1"], [f"-- {D}=550.54.15-1"]),
    ("wrong version", {"version": "550.54.15-1"}, dpkg(f"{D}\t550.40-1\tii "),
     [f"{D} 550.40-1 installed, want 550.54.15-1"], ["--allow-downgrades"]),
    ("wrong version while held", {"version": "2"}, dpkg(f"{D}\t1\thi "), [f"{D} 1 installed, want 2"],
     ["--allow-change-held-packages"]),
    ("right version", {"version": "550.54.15-1"}, dpkg(f"{D}\t550.54.15-1\tii "), [], []),
    ("triggers pending counts as installed", {}, dpkg(f"{D}\t1\tit "), [], []),
    ("triggers awaited counts as installed", {}, dpkg(f"{D}\t1\tiW "), [], []),
    ("remove", {"state": "absent"}, dpkg(f"{D}\t1\tii "), [f"remove {D}"], ["apt-get remove"]),
    ("remove leaves config-only alone", {"state": "absent"}, dpkg(f"{D}\t1\trc "), [], []),
    ("purge config-only", {"state": "purged"}, dpkg(f"{D}\t1\trc "), [f"purge {D}"], ["apt-get purge"]),
    ("purged already", {"state": "purged"}, dpkg(), [], []),
    ("hold", {"hold": True}, dpkg(f"{D}\t1\tii "), [f"hold {D}"], [f"apt-mark hold {D}"]),
    ("unhold", {"hold": False}, dpkg(f"{D}\t1\thi "), [f"unhold {D}"], [f"apt-mark unhold {D}"]),
    ("held already", {"hold": True}, dpkg(f"{D}\t1\thi "), [], []),
    ("install then hold", {"hold": True}, dpkg(), [f"install {D}", f"hold {D}"], ["apt-get install", "apt-mark hold"]),
    ("only the missing ones", {"name": ["a", "b"]}, dpkg("a\t1\tii ", "b\t\tun "), ["install b"], ["-- b"]),
]


@pytest.mark.parametrize("label, params, out, summaries, ops", PACKAGE_CASES, ids=[c[0] for c in PACKAGE_CASES])
def test_package(label, params, out, summaries, ops):
    result = package(params, out)
    assert_changes(result, summaries, ops)
    if not summaries:
        assert result.message


def test_package_in_sync_message_says_version_and_hold():
    assert package({"hold": True}, dpkg(f"{D}\t550.54\thi ")).message == f"{D} 550.54 (held) installed"


def test_package_query_that_timed_out_is_unknown_not_drift():
    with pytest.raises((Unknown, FactUnavailable)):
        package({}, shell_reply("", rc=-9, timed_out=True))


# -- service ------------------------------------------------------------------
U = "nvidia-persistenced"


def show(load="loaded", active="inactive", file="disabled"):
    return shell_reply(f"LoadState={load}\nActiveState={active}\nSubState=x\nUnitFileState={file}\n")


def service(params, out, reboot_pending=()):
    params = {"name": U, **params}
    fact = TASK_TYPES["service"].reads(build_params("service", params))[0]
    return check("service", params, {fact.key: out}, reboot_pending=reboot_pending)


SERVICE_CASES = [
    ("enable", {"enabled": True}, show(), [f"enable {U} (is disabled)"], [f"systemctl enable {U}"]),
    ("disable", {"enabled": False}, show(file="enabled"), [f"disable {U} (is enabled)"], [f"systemctl disable {U}"]),
    ("static counts as enabled", {"enabled": True}, show(file="static"), [], []),
    ("start", {"state": "started"}, show(), [f"start {U} (is inactive)"], [f"systemctl start {U}"]),
    ("stop", {"state": "stopped"}, show(active="active"), [f"stop {U}"], [f"systemctl stop {U}"]),
    ("stopped already", {"state": "stopped"}, show(active="failed"), [], []),
    ("in sync", {"state": "started", "enabled": True}, show(active="active", file="enabled"), [], []),
    ("daemon-reload goes first", {"state": "started", "daemon_reload": True}, show(), [f"start {U} (is inactive)"],
     ["systemctl daemon-reload", f"systemctl start {U}"]),
    # an earlier task (a package) may install it: what apply would do; if none does, systemctl fails there
    ("not found: would enable and start", {"state": "started", "enabled": True}, show(load="not-found"),
     [f"enable {U} (is not installed)", f"start {U} (is inactive)"], ["enable", "start"]),
]


def test_service_start_deferred_to_a_pending_reboot():
    params = {"state": "started", "enabled": True, "after_reboot": True}
    result = service(params, show(), reboot_pending=("nvidia module loaded",))
    assert [c.summary for c in result.changes] == [
        f"enable {U} (is disabled)", f"start {U}: deferred to the pending reboot (nvidia module loaded)"]
    assert [c.reboot for c in result.changes] == [False, True] and result.changes[1].ops == []
    assert service(params, show()).changes[1].ops  # nothing pending: started now


@pytest.mark.parametrize("label, params, out, summaries, ops", SERVICE_CASES, ids=[c[0] for c in SERVICE_CASES])
def test_service(label, params, out, summaries, ops):
    result = service(params, out)
    assert_changes(result, summaries, ops)
    assert all(c.verify for c in result.changes)


@pytest.mark.parametrize("state", ["restarted", "reloaded"])
def test_service_restart_is_an_action_not_a_state(state):
    result = service({"state": state}, show(active="active", file="enabled"))
    verb = state[:-2]
    assert_changes(result, [f"{verb} {U}"], [f"systemctl {verb} {U}"])
    assert [c.verify for c in result.changes] == [False]


@pytest.mark.parametrize("params, out, error, match", [
    ({"enabled": True}, show(file="masked"), Refused, "masked"),
    ({"state": "started"}, shell_reply("", rc=-9, timed_out=True), Unknown, "timed out"),
    ({"state": "started"}, shell_reply(""), Unknown, "printed nothing"),
])
def test_service_cannot_proceed(params, out, error, match):
    with pytest.raises(error, match=match):
        service(params, out)


# -- kernel_module ------------------------------------------------------------
LOADED = "nvidia 123 0 - Live 0x0\nnvidia_uvm 1 0 - Live 0x0\n"


def modules(name, loaded=LOADED, load_file=None, options_file=None):
    replies = {PROC_MODULES.key: {"exists": True, "kind": "file", "mode": 0o444, "owner": "root", "group": "root",
                                  "content_b64": base64.b64encode(loaded.encode()).decode()},
               LSMOD.key: shell_reply("")}
    for path, text in ((f"/etc/modules-load.d/{name}.conf", load_file), (f"/etc/modprobe.d/{name}.conf", options_file)):
        replies.update(stat(path, text) if text is not None else missing(path))
    return replies


KM = "nvidia_peermem"
KERNEL_CASES = [
    ("load and persist", {"name": KM}, modules(KM),
     [f"load {KM} at boot (/etc/modules-load.d/{KM}.conf)", f"load {KM} (not loaded)"],
     [f"write /etc/modules-load.d/{KM}.conf 0644 '{KM}\\n'", f"modprobe {KM}"]),
    ("dashes are underscores", {"name": "nvidia-peermem", "persist": False}, modules(KM),
     [f"load {KM} (not loaded)"], [f"modprobe {KM}"]),
    ("in sync", {"name": "nvidia_uvm"}, modules("nvidia_uvm", load_file="nvidia_uvm\n"), [], []),
    ("persist only", {"name": "nvidia_uvm"}, modules("nvidia_uvm"),
     ["load nvidia_uvm at boot (/etc/modules-load.d/nvidia_uvm.conf)"], ["write /etc/modules-load.d/nvidia_uvm.conf"]),
    ("options", {"name": "nvidia", "persist": False, "options": {"NVreg_EnableGpuFirmware": 0, "x": True}},
     modules("nvidia"), ["set options for nvidia: options nvidia NVreg_EnableGpuFirmware=0 x=1"],
     ["write /etc/modprobe.d/nvidia.conf 0644 'options nvidia NVreg_EnableGpuFirmware=0 x=1\\n'"]),
    ("options in sync", {"name": "nvidia", "persist": False, "options": "a=1"},
     modules("nvidia", options_file="options nvidia a=1\n"), [], []),
    ("absent", {"name": "nvidia_uvm", "state": "absent"}, modules("nvidia_uvm", load_file="nvidia_uvm\n"),
     ["stop loading nvidia_uvm at boot", "unload nvidia_uvm"],
     ["remove /etc/modules-load.d/nvidia_uvm.conf", "modprobe -r nvidia_uvm"]),
    ("absent already", {"name": KM, "state": "absent"}, modules(KM), [], []),
]


@pytest.mark.parametrize("label, params, replies, summaries, ops", KERNEL_CASES, ids=[c[0] for c in KERNEL_CASES])
def test_kernel_module(label, params, replies, summaries, ops):
    assert_changes(check("kernel_module", params, replies), summaries, ops)


def test_new_options_for_a_loaded_module_need_a_reboot():
    loaded = check("kernel_module", {"name": "nvidia", "persist": False, "options": "a=1"}, modules("nvidia"))
    unloaded = check("kernel_module", {"name": KM, "persist": False, "options": "a=1"}, modules(KM))
    assert [c.reboot for c in loaded.changes] == [True]
    assert [c.reboot for c in unloaded.changes] == [False, False]


def test_unreadable_modules_is_unknown():
    replies = modules(KM)
    replies[PROC_MODULES.key] = {"exists": False}
    replies[LSMOD.key] = shell_reply("", rc=1)
    with pytest.raises(FactUnavailable):
        check("kernel_module", {"name": KM}, replies)


def test_lsmod_output_serves_where_the_kernel_has_no_proc_modules():
    lsmod = "Module                  Size  Used by\nnvidia_peermem  16384  0\nib_core  454656  1 nvidia_peermem\n"
    replies = modules(KM)
    replies[PROC_MODULES.key] = {"exists": False}
    replies[LSMOD.key] = shell_reply(lsmod)
    result = check("kernel_module", {"name": KM, "persist": False}, replies)
    assert not result.changes


# -- command ------------------------------------------------------------------
def guards(creates=None, removes=None, unless=None, unless_rc=0, timed_out=False):
    replies = {}
    for path, exists in [pair for pair in (creates, removes) if pair]:
        replies.update(stat(path, with_content=False, exists=exists))
    if unless:
        fact = TASK_TYPES["command"].reads(build_params("command", {"cmd": "x", "unless": unless}))[-1]
        replies[fact.key] = shell_reply("", unless_rc, timed_out)
    return replies


COMMAND_CASES = [
    ("no guard: always runs, an action", {"cmd": "nvidia-smi -pm 1"}, {}, ["run: nvidia-smi -pm 1"],
     ["nvidia-smi -pm 1"], False),
    ("a list is quoted", {"cmd": ["echo", "a b;c"]}, {}, ["run: echo 'a b;c'"], ["echo 'a b;c'"], False),
    ("env and chdir", {"cmd": "make", "env": {"A": "1 2"}, "chdir": "/opt/x y"}, {}, ["run: make"],
     ["cd '/opt/x y' && env 'A=1 2' make"], False),
    ("creates exists", {"cmd": "x", "creates": "/done"}, guards(creates=("/done", True)), [], [], None),
    ("creates missing", {"cmd": "x", "creates": "/done"}, guards(creates=("/done", False)), ["run: x"], ["x"], True),
    ("removes missing", {"cmd": "x", "removes": "/f"}, guards(removes=("/f", False)), [], [], None),
    ("removes present", {"cmd": "x", "removes": "/f"}, guards(removes=("/f", True)), ["run: x"], ["x"], True),
    ("unless succeeds", {"cmd": "x", "unless": "test -e /y"}, guards(unless="test -e /y"), [], [], None),
    ("unless fails", {"cmd": "x", "unless": ["test", "-e", "/y"]}, guards(unless=["test", "-e", "/y"], unless_rc=1),
     ["run: x"], ["x"], True),
]


@pytest.mark.parametrize("label, params, replies, summaries, ops, verify", COMMAND_CASES,
                         ids=[c[0] for c in COMMAND_CASES])
def test_command(label, params, replies, summaries, ops, verify):
    result = check("command", params, replies)
    assert_changes(result, summaries, ops)
    if verify is not None:
        assert [c.verify for c in result.changes] == [verify]


def test_command_check_reads_only_its_guards():
    task, params = TASK_TYPES["command"], build_params("command", {"cmd": "rm -rf /x", "unless": "test -e /y"})
    reads = task.reads(params)
    assert [f.request["cmd"] for f in reads if f.request["op"] == "sh"] == ["test -e /y"]  # never cmd itself


def test_command_unless_timed_out_is_unknown():
    with pytest.raises(Unknown, match="timed out"):
        check("command", {"cmd": "x", "unless": "sleep 99"}, guards(unless="sleep 99", unless_rc=-9, timed_out=True))


# -- assert -------------------------------------------------------------------
FACTS = {"facts": {"gpu_count": 8, "kernel": "6.8.0-45-generic"}, "out": {"rc": 0}}


@pytest.mark.parametrize("that", ["facts.gpu_count == 8", ["out.rc == 0", "facts.kernel.startswith('6.8')"]])
def test_assert_holds(that):
    result = check("assert", {"that": that, "success_msg": "8 GPUs"}, {}, variables=FACTS)
    assert not result.changes and result.message == "8 GPUs"


def test_assert_fails_with_its_message():
    with pytest.raises(Refused, match="expected 8 GPUs"):
        check("assert", {"that": ["out.rc == 0", "facts.gpu_count == 4"], "fail_msg": "expected 8 GPUs"}, {},
              variables=FACTS)
    with pytest.raises(Refused, match="assertion failed: facts.gpu_count < 2"):
        check("assert", {"that": "facts.gpu_count < 2"}, {}, variables=FACTS)
