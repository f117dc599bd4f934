"""become_user and delegate_to on lab nodes over SSH: a command and a file as `nobody` (id -un,
the file's owner), a read delegated to the other node and a step delegated to the controller,
recorded on the original host; check mode writes nothing anywhere."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

WHO, OWNED = "/tmp/gpuconf-become-who", "/tmp/gpuconf-become-owned"


def gpuconf(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuconf", *argv], capture_output=True, text=True,
                          timeout=timeout)


def test_become_user_and_delegate_to_over_ssh(lab, ssh, tmp_path):
    inventory = str(lab.inventory_path.parent)
    local = tmp_path / "asked"
    site = tmp_path / "site.yml"
    site.write_text(textwrap.dedent(f"""\
        - hosts: a100-01
          gather_facts: false
          become: true
          tasks:
            - name: a command as nobody
              shell: {{cmd: "id -un > {WHO}", creates: {WHO}}}
              become_user: nobody
            - name: a file as nobody
              file: {{path: {OWNED}, content: "x\\n"}}
              become_user: nobody
            - name: ask the other node
              shell: {{cmd: "hostname; id -un"}}
              check_mode: false
              delegate_to: a100-02
              register: other
            - name: on the controller
              shell: {{cmd: "echo '{{{{ inventory_hostname }}}} asked {{{{ other.stdout_lines | join(' ') }}}}' > {local}",
                         creates: "{local}"}}
              delegate_to: localhost
        """))
    for node in ("a100-01", "a100-02"):
        ssh(node, f"sudo rm -f {WHO} {OWNED}")
    check = gpuconf("check", str(site), "-i", inventory, "--no-retry-file", "--report", str(tmp_path / "c.json"))
    assert check.returncode == 2, check.stdout + check.stderr
    for node in ("a100-01", "a100-02"):
        assert ssh(node, "ls /tmp | grep -c gpuconf-become || true")[1].strip() == "0"  # check wrote nothing
    assert not local.exists()
    first = gpuconf("apply", str(site), "-i", inventory, "--no-retry-file", "--report", str(tmp_path / "a.json"))
    assert first.returncode == 0, first.stdout + first.stderr
    hosts = json.loads((tmp_path / "a.json").read_text())["hosts"]
    assert list(hosts) == ["a100-01"]  # the delegated tasks are recorded on the original host
    assert [t["status"] for t in hosts["a100-01"]["tasks"]] == ["changed", "changed", "ok", "changed"]
    assert ssh("a100-01", f"cat {WHO}")[1] == "nobody\n"
    assert ssh("a100-01", f"stat -c %U {OWNED}")[1] == "nobody\n"
    assert local.read_text() == "a100-01 asked a100-02 root\n"  # the other node answered, as root (become)
    second = gpuconf("apply", str(site), "-i", inventory, "--no-retry-file", "--detailed-exitcodes")
    assert second.returncode == 0, second.stdout + second.stderr  # 2 would mean something changed
    for node in ("a100-01", "a100-02"):
        ssh(node, f"sudo rm -f {WHO} {OWNED}")
