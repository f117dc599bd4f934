"""`gpuconf validate`: static problems found with no connection, named by task and host."""
from pathlib import Path
from textwrap import dedent

import pytest

from gpuconf.cli.main import main
from gpuconf.engine.validate import validate
from gpuconf.errors import PlaybookError
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook

HOSTS = "all:\n  hosts:\n    node1: {driver: '550'}\n    node2:\n"

PLAYBOOK = """\
- hosts: all
  tasks:
    - name: uses facts and a registered result
      command:
        cmd: "echo {{ facts.kernel }} {{ facts.gpus[0].pci_address }}"
      register: probe
      when: facts.gpu_count > 0 and probe.rc == 0
    - name: reads the registered value
      file:
        path: /tmp/out
        content: "{{ probe.stdout | trim }} {{ inventory_hostname }} {{ groups['all'] | length }}"
      notify: restart persistenced
    - name: pins the driver
      package:
        name: "nvidia-driver-{{ driver }}"
    - name: typo
      file:
        path: /etc/{{ nvidia_mod }}.conf
  handlers:
    - name: restart nvidia-persistenced
      listen: restart persistenced
      service: {name: nvidia-persistenced, state: restarted}
"""


def problems_for(tmp_path: Path, playbook: str, extra=None, hosts: str = HOSTS) -> list[str]:
    (tmp_path / "hosts.yml").write_text(hosts)
    (tmp_path / "site.yml").write_text(dedent(playbook))
    inventory = load_inventory(str(tmp_path / "hosts.yml"))
    return validate(inventory, load_playbook(tmp_path / "site.yml", tmp_path), extra or {})


def test_undefined_variables_are_reported_with_task_and_host(tmp_path):
    problems = problems_for(tmp_path, PLAYBOOK)
    site = tmp_path / "site.yml"
    assert sorted(problems) == [
        f"{site}:13:7: 'driver' is undefined (task 'pins the driver', host node2)",
        f"{site}:16:7: 'nvidia_mod' is undefined (task 'typo', host node1)",
    ]


def test_extra_vars_define_what_was_missing(tmp_path):
    assert problems_for(tmp_path, PLAYBOOK, {"driver": "535", "nvidia_mod": "nvidia"}) == []


def test_notify_of_an_unknown_handler_is_refused_at_load(tmp_path):
    # refused when the playbook loads (issue 29, finding 9), so check and apply refuse it too
    with pytest.raises(PlaybookError) as caught:
        problems_for(tmp_path, """\
        - hosts: all
          tasks:
            - name: writes
              file: {path: /tmp/x, content: x}
              notify: [restart persistenced, reload fm]
          handlers:
            - name: restart persistenced
              service: {name: nvidia-persistenced, state: restarted}
        """)
    assert str(caught.value) == (f"{tmp_path / 'site.yml'}:3:7: The requested handler 'reload fm' was not found "
                                 "in either the main handlers list nor in the listening handlers list (task "
                                 "'writes' notifies it)")


def test_a_rendered_value_of_the_wrong_type_is_reported(tmp_path):
    problems = problems_for(tmp_path, """\
        - hosts: all
          vars: {m: rwx}
          tasks:
            - name: bad mode
              file: {path: /tmp/x, mode: "{{ m }}"}
        """)
    assert len(problems) == 1 and "octal" in problems[0] and "task 'bad mode', host node1" in problems[0]


def test_a_play_matching_no_hosts_is_a_warning(tmp_path):
    problems = problems_for(tmp_path, "- hosts: storage\n  tasks: []\n")
    assert len(problems) == 1 and ": warning: " in problems[0] and "matches no hosts" in problems[0]


@pytest.mark.parametrize("extra, code", [([], 1), (["-e", "driver=535", "-e", "nvidia_mod=x"], 0)])
def test_cli_exit_code(tmp_path, capsys, extra, code):
    problems_for(tmp_path, PLAYBOOK)  # writes the files
    assert main(["validate", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml"), *extra]) == code
    out, err = capsys.readouterr()
    if code:
        assert "gpuconf: error: " in err and "'driver' is undefined" in err
    else:
        assert "valid" in out and err == ""
