"""Issue 31, defect 4, on a lab node over SSH: `apply -vvv` of a play with a vault value, a
`secret_vars` entry and a `!secret` value, and copies of each made by filters (`| upper`, a
slice, `| reverse | join`, `'x' ~ secret`), prints none of them: not on stdout or stderr, not in
the JSON, JUnit, Prometheus or HTML report, not in the retry file. The node still gets them."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

VAULT = Path(__file__).parent.parent / "fixtures" / "vault"
SECRETS = {"vault_token": "s3cr3t-T0ken-4711", "listed": "listed-S3cret-4242", "tagged": "tagged-S3cret-9393"}
REMOTE = "/tmp/gpuconf-h3-derived"


def derived(value: str) -> list[str]:
    """The secret and each copy the play makes of it, as the node receives them."""
    return [value, value.upper(), value[2:], value[::-1], "x" + value]


PLAY = """\
- hosts: a100-01
  gather_facts: false
  vars_files: [secrets.yml]
  vars:
    secret_vars: [listed]
    listed: listed-S3cret-4242
    tagged: !secret tagged-S3cret-9393
  tasks:
{tasks}"""

TASK = """\
    - name: copies of {name} echoed back by the node
      shell: {{cmd: "echo {{{{ {name} }}}} {{{{ {name} | upper }}}} {{{{ {name}[2:] }}}} {{{{ {name} | reverse | join }}}} {{{{ 'x' ~ {name} }}}}"}}
    - name: copies of {name} written on the node
      file: {{path: "{remote}-{name}", mode: "0600", content: "{{{{ {name} | upper }}}}\\n{{{{ {name}[2:] }}}}\\n{{{{ {name} | reverse | join }}}}\\n{{{{ 'x' ~ {name} }}}}\\n"}}
    - name: a debug of {name}
      debug: {{msg: "{{{{ {name} | upper }}}} {{{{ {name}[2:] }}}}"}}
"""

MORE = """\
    - name: a loop over a vault list
      debug: {msg: "{{ item | upper }}"}
      loop: "{{ vault_list }}"
    - name: the node echoes a secret back
      shell: {cmd: "echo {{ tagged }}"}
      register: echoed
    - name: a copy of what the node said
      debug: {msg: "{{ echoed.stdout | upper }} {{ echoed.stdout[2:] }}"}
    - name: a command that fails with the copies in its output
      shell: {cmd: "echo {{ tagged | reverse | join }} {{ listed | upper }} >&2; echo {{ vault_token[2:] }}; exit 3"}
"""


def gpuconf(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuconf", *argv], capture_output=True, text=True, timeout=300)


def test_apply_vvv_prints_no_secret_and_no_copy_made_by_a_filter(lab, ssh, tmp_path):
    shutil.copy(VAULT / "secrets.yml", tmp_path / "secrets.yml")
    tasks = "".join(TASK.format(name=name, remote=REMOTE) for name in SECRETS) + MORE
    site = tmp_path / "site.yml"
    site.write_text(PLAY.format(tasks=tasks))
    ssh("a100-01", f"sudo rm -f {REMOTE}-*")
    reports = {name: tmp_path / name for name in ("r.json", "j.xml", "m.prom", "r.html", "site.retry")}
    done = gpuconf("apply", str(site), "-i", str(lab.inventory_path.parent), "-vvv", "--diff",
                   "--vault-password-file", str(VAULT / "password.txt"), "--report", str(reports["r.json"]),
                   "--junit", str(reports["j.xml"]), "--prometheus", str(reports["m.prom"]),
                   "--html", str(reports["r.html"]), "--retry-file", str(reports["site.retry"]))
    assert done.returncode == 4, done.stdout + done.stderr  # the last task fails, the rest is applied
    assert "write request" in done.stdout + done.stderr  # -vvv showed the requests
    assert "********" in done.stdout
    outputs = {"stdout": done.stdout, "stderr": done.stderr}
    outputs.update({name: path.read_text() for name, path in reports.items()})
    assert "a100-01" in outputs["site.retry"]
    values = [value for secret in SECRETS.values() for value in derived(secret)] + [
        "alpha-secret-item", "ALPHA-SECRET-ITEM"]  # the vault list's string, in a loop's label and upper-cased
    leaks = [(where, value) for where, text in outputs.items() for value in values if value in text]
    assert leaks == []
    for name, secret in SECRETS.items():  # the node got the real values
        on_node = ssh("a100-01", f"sudo cat {REMOTE}-{name}")[1]
        assert on_node == f"{secret.upper()}\n{secret[2:]}\n{secret[::-1]}\nx{secret}\n"
