"""End to end on this machine (`-c local`) into tmp_path: check changes nothing,
apply converges, a second apply changes nothing, and check after apply is clean."""
import hashlib
import json
import sys
from pathlib import Path

import yaml

from gpuconf.cli.main import main


def digest(root: Path) -> dict[str, tuple]:
    """Every path under root with its mode, inode, mtime and content hash: any write shows."""
    found = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        data = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        found[str(path.relative_to(root))] = (st.st_mode, st.st_ino, st.st_mtime_ns, data)
    return found


def local_inventory(tmp_path: Path) -> str:
    """localhost, with this interpreter as the runner's python (no shim on every round trip)."""
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"python": sys.executable}}}}))
    return str(path)


def build(tmp_path: Path) -> Path:
    role = tmp_path / "roles" / "gpu_node"
    for sub in ("tasks", "templates", "files", "handlers", "defaults"):
        (role / sub).mkdir(parents=True)
    (role / "defaults" / "main.yml").write_text("persistence: 1\n")
    (role / "templates" / "gpu.conf.j2").write_text(
        "# managed\n{% for gpu in gpus %}gpu{{ loop.index0 }}={{ gpu }} persistence={{ persistence }}\n{% endfor %}")
    (role / "files" / "motd").write_text("GPU node\n")
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump([
        {"name": "config dir", "directory": {"path": "{{ target }}/etc/gpu", "mode": "0750"}},
        {"name": "config from a template", "file": {"path": "{{ target }}/etc/gpu/gpu.conf", "template": "gpu.conf.j2",
                                                    "mode": "0640"}, "notify": "reload"},
        {"name": "motd from files/", "file": {"path": "{{ target }}/motd", "src": "motd"}},
        {"name": "a line", "line": {"path": "{{ target }}/etc/modprobe.conf", "regexp": "^blacklist nouveau",
                                    "line": "blacklist nouveau"}},
        {"name": "stale file gone", "file": {"path": "{{ target }}/old.conf", "state": "absent"}},
        {"name": "one-time setup", "shell": {"cmd": "echo done > {{ target | quote }}/marker",
                                               "creates": "{{ target }}/marker"}},
    ]))
    (role / "handlers" / "main.yml").write_text(yaml.safe_dump([
        {"name": "reload", "shell": {"cmd": "echo reloaded >> {{ target | quote }}/handler.log"}}]))
    (tmp_path / "site.yml").write_text(yaml.safe_dump([{
        "hosts": "all", "vars": {"gpus": ["a100", "a100"]}, "roles": ["gpu_node"],
    }]))
    target = tmp_path / "target"
    target.mkdir()
    (target / "old.conf").write_text("stale\n")
    (target / "etc").mkdir()
    (target / "etc" / "modprobe.conf").write_text("options x y=1\n")
    return target


def gpuconf(tmp_path: Path, verb: str, *extra: str) -> tuple[int, dict]:
    report = tmp_path / f"report-{verb}.json"
    code = main([verb, str(tmp_path / "site.yml"), "-i", local_inventory(tmp_path), "-c", "local",
                 "-e", f"target={tmp_path / 'target'}", "--report", str(report), *extra])
    data = json.loads(report.read_text())
    return code, {t["task"]: t["status"] for t in data["hosts"]["localhost"]["tasks"]}


def test_check_apply_apply_check(tmp_path, capsys):
    target = build(tmp_path)
    tasks = ["config dir", "config from a template", "motd from files/", "a line", "stale file gone",
             "one-time setup"]

    before = digest(target)
    code, statuses = gpuconf(tmp_path, "check")
    assert code == 2
    # the handler (a shell line with no guard) is skipped in check mode, as Ansible skips it
    assert statuses == dict.fromkeys(tasks, "would_change") | {"reload": "skipped"}
    assert digest(target) == before, "check modified the target"

    code, statuses = gpuconf(tmp_path, "apply", "--detailed-exitcodes")
    assert code == 2 and statuses == dict.fromkeys(tasks, "changed") | {"reload": "changed"}
    assert (target / "etc" / "gpu" / "gpu.conf").read_text() == \
        "# managed\ngpu0=a100 persistence=1\ngpu1=a100 persistence=1\n"
    assert (target / "etc" / "gpu" / "gpu.conf").stat().st_mode & 0o777 == 0o640
    assert (target / "etc" / "gpu").stat().st_mode & 0o777 == 0o750
    assert (target / "motd").read_text() == "GPU node\n"
    assert (target / "etc" / "modprobe.conf").read_text() == "options x y=1\nblacklist nouveau\n"
    assert not (target / "old.conf").exists()
    assert (target / "marker").read_text() == "done\n"

    converged = digest(target)
    code, statuses = gpuconf(tmp_path, "apply", "--detailed-exitcodes")
    assert code == 0 and statuses == dict.fromkeys(tasks, "ok")  # no handler: nothing changed
    assert digest(target) == converged, "a second apply rewrote something"
    assert (target / "handler.log").read_text() == "reloaded\n"

    code, statuses = gpuconf(tmp_path, "check")
    assert code == 0 and statuses == dict.fromkeys(tasks, "ok")
    assert digest(target) == converged

    (target / "etc" / "gpu" / "gpu.conf").write_text("# hand edited\n")
    drifted = digest(target)
    code, statuses = gpuconf(tmp_path, "check", "--diff")
    assert code == 2 and statuses["config from a template"] == "would_change"
    assert [t for t, s in statuses.items() if s == "would_change"] == ["config from a template"]
    assert statuses["reload"] == "skipped"
    assert digest(target) == drifted
    assert "-# hand edited" in capsys.readouterr().out  # --diff shows the content change


def test_check_mode_skips_a_command_and_registers_what_ansible_registers(tmp_path, capsys):
    """Check mode never runs a command: with no guard it is skipped, registering Ansible's values
    (rc 0, empty stdout, 'Command would have run if not in check mode'); apply runs it."""
    (tmp_path / "site.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "probe", "command": {"cmd": "echo 550"}, "register": "probe"},
        {"name": "uses it", "file": {"path": f"{tmp_path}/driver", "content": "{{ probe.stdout }}"},
         "when": "probe.rc == 0 and probe is skipped"},
    ]}]))
    argv = [str(tmp_path / "site.yml"), "-i", local_inventory(tmp_path), "-c", "local", "--report",
            str(tmp_path / "r.json")]
    assert main(["check", *argv]) == 2
    report = json.loads((tmp_path / "r.json").read_text())["hosts"]["localhost"]
    assert [t["status"] for t in report["tasks"]] == ["skipped", "would_change"]
    assert report["registered"][0]["value"] == {
        "changed": False, "failed": False, "msg": "Command would have run if not in check mode", "rc": 0,
        "skipped": True,
        "stdout": "", "stdout_lines": [], "stderr": "", "stderr_lines": []}
    assert not (tmp_path / "driver").exists()
    # apply: it runs; a registered stdout loses its last newline, as Ansible's does (issue 29, finding 2)
    (tmp_path / "site.yml").write_text((tmp_path / "site.yml").read_text().replace(" and probe is skipped", ""))
    assert main(["apply", *argv]) == 0 and (tmp_path / "driver").read_text() == "550"


def test_command_output_with_braces_is_text_not_a_template(tmp_path):
    (tmp_path / "site.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "probe", "command": {"cmd": "printf '%s%s nope }}' '{' '{'"}, "register": "probe"},
        {"name": "keep it", "file": {"path": f"{tmp_path}/out", "content": "{{ probe.stdout }}"}},
    ]}]))
    assert main(["apply", str(tmp_path / "site.yml"), "-i", local_inventory(tmp_path), "-c", "local"]) == 0
    assert (tmp_path / "out").read_text() == "{{ nope }}"


def test_two_inventory_hosts_on_the_local_connection_share_the_one_run_lock(tmp_path):
    """Both are this machine: the run takes its lock once (it waited for itself, then said 'busy')."""
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {
        name: {"ansible_connection": "local", "python": sys.executable} for name in ("one", "two")}}}))
    (tmp_path / "site.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "write", "copy": {"content": "x\n", "dest": f"{tmp_path}/out-{{{{ inventory_hostname }}}}"}},
    ]}]))
    # the default wait: this machine's lock (/run/gpuconf.lock) is also every other local run's on it, such as
    # another test process's under `make test`; a run that waits for itself still ends 'busy', after the wait
    code = main(["apply", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml"), "--lock-wait", "60",
                 "--no-retry-file"])
    assert code == 0
    assert (tmp_path / "out-one").read_text() == (tmp_path / "out-two").read_text() == "x\n"
