"""Consecutive package tasks as one package transaction (issue 27, item 7): which tasks right
after a changed one may go with it (gpuconf/engine/joint.py, HostPlanner.joinable), and how their
ops become one list with one transaction (gpuconf/tasks/packages.py, join_ops). The lab shows the
one transaction in apt's history (tests/gpu/test_package_transactions.py)."""
from __future__ import annotations

from pathlib import Path

from gpuconf.engine.options import RunOptions
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.runner import Runner
from gpuconf.engine.variables import magic_variables
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook
from gpuconf.tasks.packages import AptBackend, DnfBackend, PackageOp, join_ops
from gpuconf.tasks.registry import TASK_TYPES

HEAD = """\
- hosts: all
  gather_facts: false
  vars: {want_dcgm: true}
  tasks:
    - name: first
      package: {name: dkms}
      register: first_result
"""


def joinable(tmp_path: Path, rest: str) -> list[str]:
    """The names of the tasks after `first` that may apply together with it."""
    (tmp_path / "site.yml").write_text(HEAD + rest)
    inventory = load_inventory("n1,")
    playbook = load_playbook(tmp_path / "site.yml", tmp_path)
    runner = Runner(inventory, playbook, RunOptions(verb="apply"))
    play = playbook.plays[0]
    magic = magic_variables(inventory, "n1", ["n1"], True, None, runner.shared)
    planner = HostPlanner(play, "n1", inventory.host_vars("n1"), magic, runner.options, {})
    first, *upcoming = play.tasks
    return [task.name for task, _ in planner.joinable(first, upcoming)]


def test_consecutive_package_changes_of_every_package_task_type_join(tmp_path):
    assert joinable(tmp_path, """\
    - name: companion
      nvidia_driver_companion: {package: fabricmanager, branch: 580, version: "580.178.04"}
    - name: second
      package: {name: [datacenter-gpu-manager-4-core], version: "4.7.0-1"}
      when: want_dcgm
      notify: restart dcgm   # handlers run at the end of the play: no boundary
    - name: a file ends the run
      file: {path: /etc/x.conf, content: "x"}
    - name: not after the file
      package: {name: opensm}
  handlers:
    - name: restart dcgm
      service: {name: nvidia-dcgm, state: restarted}
""") == ["companion", "second"]


def test_a_task_of_another_type_in_between_ends_the_run(tmp_path):
    assert joinable(tmp_path, """\
    - set_fact: {x: 1}
    - name: after set_fact
      package: {name: opensm}
""") == []


def test_a_condition_on_a_registered_result_of_the_run_is_no_join(tmp_path):
    assert joinable(tmp_path, """\
    - name: reads the first's result
      package: {name: opensm}
      when: first_result is changed
""") == []
    # through a variable made from it, and a register of the run's second task
    assert joinable(tmp_path, """\
    - name: second
      package: {name: opensm}
      register: second_result
      vars: {extra: "{{ 'x' }}"}
    - name: reads the second's result through a variable
      package: {name: "{{ chosen }}"}
      vars: {chosen: "{{ 'ibutils' if second_result is changed else 'infiniband-diags' }}"}
""") == ["second"]


def test_another_become_timeout_loop_or_block_is_no_join(tmp_path):
    for keywords in ("become: false", "timeout: 30", "loop: [a, b]", "run_once: true"):
        rest = f"""\
    - name: differs
      package: {{name: opensm}}
      {keywords}
"""
        assert joinable(tmp_path, rest) == [], keywords
    assert joinable(tmp_path, """\
    - name: a block
      block:
        - name: in a block
          package: {name: opensm}
""") == []


def test_a_false_condition_ends_the_run(tmp_path):
    assert joinable(tmp_path, """\
    - name: skipped
      package: {name: opensm}
      when: not want_dcgm
    - name: after it
      package: {name: ibutils}
""") == []


def test_the_kind_is_the_task_types_own():
    kinds = {name: TASK_TYPES[name].batch for name in ("package", "nvidia_driver_stack", "nvidia_driver_companion",
                                                        "file", "service", "reboot")}
    assert kinds == {"package": "package", "nvidia_driver_stack": "package", "nvidia_driver_companion": "package",
                     "file": "", "service": "", "reboot": ""}


# -- the ops of several tasks as one list ----------------------------------------

APT = AptBackend()


def test_installs_join_into_one_apt_get_with_the_holds_after_it_in_task_order():
    driver = [APT.install(["nvidia-utils-580=580.178.04-1"], True), APT.hold(["nvidia-utils-580"], True)]
    docker = [APT.install(["docker.io"], False)]
    toolkit = [APT.install(["nvidia-container-toolkit=1.20.0-1"], True), APT.hold(["nvidia-container-toolkit"], True)]
    ops = join_ops([driver, docker, toolkit])
    assert ops is not None
    assert [op.description.split(" -- ")[-1] if "apt-get" in op.description else op.description for op in ops] == [
        "nvidia-utils-580=580.178.04-1 docker.io nvidia-container-toolkit=1.20.0-1",
        "run: apt-mark hold nvidia-utils-580", "run: apt-mark hold nvidia-container-toolkit"]
    assert "--allow-change-held-packages" in ops[0].command   # one of them allowed it
    assert isinstance(ops[1], PackageOp) and ops[1].marks == ("nvidia-utils-580",)  # still checked as held


def test_the_repair_of_an_interrupted_dpkg_runs_once_first():
    repair = APT.repair(())
    ops = join_ops([[*repair, APT.install(["dkms"], False)], [*repair, APT.install(["opensm"], False)]])
    assert ops is not None and len(ops) == 2
    assert ops[0].description == "run: dpkg --configure -a" and ops[1].command.endswith("-- dkms opensm")


def test_removals_ride_on_the_install_and_what_cannot_be_one_transaction_is_not_joined():
    ops = join_ops([[APT.install(["dkms"], False)], [APT.remove(["nouveau-firmware"], purge=True, allow_held=False)]])
    assert ops is not None and len(ops) == 1
    assert "--purge" in ops[0].command and ops[0].command.endswith("-- dkms nouveau-firmware-")
    assert join_ops([[APT.remove(["a"], purge=True, allow_held=False)],
                     [APT.remove(["b"], purge=False, allow_held=False)]]) is None   # --purge is the whole one's
    assert join_ops([[APT.install(["a"], False)], [DnfBackend().install(["b"], False)]]) is None
    assert join_ops([[APT.install(["a=1"], False)], [APT.install(["a=2"], False)]]) is None
    assert join_ops([[APT.install(["a"], False)], [APT.remove(["a"], purge=False, allow_held=False)]]) is None
    two = [APT.install(["a"], False), APT.install(["b"], False)]
    assert join_ops([two, [APT.install(["c"], False)]]) is None   # a task with two transactions goes alone


def test_dnf_joins_installs_and_removals_into_one_dnf_shell():
    dnf = DnfBackend()
    ops = join_ops([[dnf.install(["dkms"], False)], [dnf.remove(["nouveau-firmware"], purge=False, allow_held=False)]])
    assert ops is not None and len(ops) == 1
    assert ops[0].request.get("stdin") == "remove nouveau-firmware\ninstall dkms\nrun\n"
