"""Planning shortcuts give exactly what full rendering gives: the plan cache shared by hosts, and
plain references looked up without a Jinja context."""
from pathlib import Path

import pytest

from gpuconf.engine.options import RunOptions
from gpuconf.engine.plancache import PlanCache
from gpuconf.engine.planner import HostPlanner
from gpuconf.engine.runner import Runner
from gpuconf.engine.variables import magic_variables
from gpuconf.errors import TemplateError
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook
from gpuconf.templating.render import Vars, render

HOSTS = """\
all:
  vars: {conf_dir: /etc/gpu}
  children:
    rack1:
      vars: {rack: r1}
      hosts: {n1: {}, n2: {}, n3: {extra_module: ib_umad}}
    rack2:
      vars: {rack: r2, conf_dir: /etc/gpu2}
      hosts: {n4: {}, n5: {}}
"""

PLAYBOOK = """\
- hosts: all
  vars: {modules: [ib_uverbs]}
  tasks:
    - name: shared by all
      file: {path: "{{ conf_dir }}/common.conf", content: "x\\n"}
    - name: per rack
      file: {path: "/etc/rack-{{ rack }}.conf", content: "x\\n"}
    - name: per host
      file: {path: "/etc/{{ inventory_hostname }}.conf", content: "x\\n"}
    - name: only where a host variable says so
      kernel_module: {name: "{{ extra_module }}"}
      when: extra_module is defined
    - name: depends on facts
      file: {path: "/etc/{{ facts.kernel }}.conf", content: "x\\n"}
    - name: a condition on a list
      kernel_module: {name: ib_uverbs}
      when: "'ib_uverbs' in modules"
"""


def planned(tmp_path: Path, cache: PlanCache | None) -> dict[str, list]:
    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    inventory = load_inventory(str(tmp_path / "hosts.yml"))
    playbook = load_playbook(tmp_path / "site.yml", tmp_path)
    runner = Runner(inventory, playbook, RunOptions())
    play = playbook.plays[0]
    plans = {}
    for host in runner.play_hosts(play):
        magic = magic_variables(inventory, host, runner.play_hosts(play), True, None, runner.shared)
        on_host = HostPlanner(play, host, inventory.host_vars(host), magic, runner.options, {}, plan_cache=cache)
        plans[host] = [(fact.key, fact.request) for fact in on_host.facts_of(play.tasks, speculative=True)]
    return plans


def test_shared_plans_equal_plans_rendered_on_each_host(tmp_path):
    cache = PlanCache()
    assert planned(tmp_path, cache) == planned(tmp_path, None)
    variants = {task.name: len(slot[1]) for task, slot in ((slot[0], slot) for slot in cache._tasks.values())}
    assert variants["shared by all"] == 2      # one per value of conf_dir
    assert variants["per rack"] == 2
    assert variants["per host"] == 5


def test_each_host_gets_its_own_values(tmp_path):
    plans = planned(tmp_path, PlanCache())
    paths = {host: [request.get("path") for _, request in plan] for host, plan in plans.items()}
    assert "/etc/gpu/common.conf" in paths["n1"] and "/etc/gpu2/common.conf" in paths["n4"]
    assert "/etc/rack-r1.conf" in paths["n2"] and "/etc/rack-r2.conf" in paths["n5"]
    assert "/etc/n3.conf" in paths["n3"] and "/etc/n3.conf" not in paths["n2"]
    assert any("ib_umad" in str(request) for _, request in plans["n3"])
    assert not any("ib_umad" in str(request) for _, request in plans["n1"])
    assert not any("unknowable" in str(request) for plan in plans.values() for _, request in plan)


@pytest.mark.parametrize("text, expected", [
    ("{{ site.name }}", "dc1"),
    ("{{ site['name'] }}", "dc1"),
    ("{{ ports }}", [1, 2]),
    ("{{ true }}", True),                   # a Jinja literal, even with a variable of that name
    ("x-{{ site.name }}-{{ n }}", "x-dc1-3"),
    ("{{ n }}{{ n }}", "33"),
    ("{{ range }}", render("{{ range }}", Vars({}))),  # a Jinja global
])
def test_plain_references_behave_as_jinja(text, expected):
    variables = Vars({"site": {"name": "dc1"}, "ports": [1, 2], "true": "no", "n": 3})
    assert render(text, variables) == expected


@pytest.mark.parametrize("text, message", [
    ("{{ nope }}", "'nope' is undefined"),
    ("a-{{ nope }}", "'nope' is undefined"),
    ("{{ site.missing }}", "has no attribute 'missing'"),
    ("a-{{ site.missing }}", "has no attribute 'missing'"),
])
def test_plain_references_fail_as_jinja(text, message):
    with pytest.raises(TemplateError, match=message):
        render(text, Vars({"site": {"name": "dc1"}}))


def test_only_tasks_the_first_pass_could_not_plan_are_planned_again_and_no_read_is_lost(tmp_path):
    """Before its first task, a host plans its reads twice: before the facts (speculative), then
    only the tasks that pass could not plan. Together they read all that planning every task with
    the facts would."""
    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    inventory = load_inventory(str(tmp_path / "hosts.yml"))
    playbook = load_playbook(tmp_path / "site.yml", tmp_path)
    play, runner = playbook.plays[0], Runner(inventory, playbook, RunOptions())
    for host in ("n1", "n3"):
        magic = magic_variables(inventory, host, runner.play_hosts(play), True, None, runner.shared)
        on_host = HostPlanner(play, host, inventory.host_vars(host), magic, runner.options, {}, plan_cache=PlanCache())
        left: list = []
        first = on_host.facts_of(play.tasks, speculative=True, left=left)
        on_host.facts.update({"kernel": "6.1.0-28-amd64"})
        second = on_host.facts_of(left)
        expected = {"depends on facts"} | ({"only where a host variable says so"} if host == "n1" else set())
        assert {task.name for task in left} == expected
        assert {f.key for f in on_host.facts_of(play.tasks)} <= {f.key for f in first + second}
        assert any("6.1.0-28-amd64" in str(f.request) for f in second)


PREPARED = """\
- hosts: all
  vars: {module: ib_uverbs, rack_module: "mod_{{ rack }}"}
  tasks:
    - name: shared by all
      kernel_module: {name: "{{ module }}"}
    - name: per rack
      kernel_module: {name: "mod_{{ rack }}"}
    - name: only where a host variable says so
      kernel_module: {name: "{{ extra_module }}"}
      when: extra_module is defined
    - name: depends on facts
      kernel_module: {name: "{{ facts.module }}"}
    - name: reads the controller's files while it resolves
      file: {path: "{{ conf_dir }}/common.conf", content: "x\\n"}
    - name: reads another host's variables, which its facts fill in as the run goes
      kernel_module: {name: "{{ hostvars['n3'].extra_module }}"}
    - name: a condition on this host's facts, params that read none
      kernel_module: {name: "{{ module }}"}
      when: facts.module != 'nvidia_n2'
    - name: a condition and params on this host's facts
      kernel_module: {name: "{{ facts.module }}_x"}
      when: facts.module is defined
    - name: a condition and params through one variable, rendered first for the condition
      kernel_module: {name: "{{ rack_module }}"}
      when: facts.module is defined and rack_module != 'none'
"""


def prepared(tmp_path: Path, cache: PlanCache | None) -> dict[str, list]:
    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "site.yml").write_text(PREPARED)
    inventory = load_inventory(str(tmp_path / "hosts.yml"))
    playbook = load_playbook(tmp_path / "site.yml", tmp_path)
    play, runner = playbook.plays[0], Runner(inventory, playbook, RunOptions())
    params = {}
    for host in runner.play_hosts(play):
        magic = magic_variables(inventory, host, runner.play_hosts(play), True, None, runner.shared)
        on_host = HostPlanner(play, host, inventory.host_vars(host), magic, runner.options, {}, plan_cache=cache)
        on_host.facts.update({"module": f"nvidia_{host}"})
        params[host] = [None if (p := on_host.prepare(task)) is None else p[1] for task in play.tasks]
    return params


def test_hosts_that_look_up_the_same_objects_share_params_and_every_host_gets_its_own_values(tmp_path):
    cache = PlanCache()
    shared, rendered = prepared(tmp_path, cache), prepared(tmp_path, None)
    assert shared == rendered                                     # exactly what rendering on each host gives
    assert shared["n1"][0] is shared["n5"][0]                     # one object for the whole fleet
    assert shared["n1"][1] is shared["n2"][1] and shared["n1"][1] is not shared["n4"][1]   # one per rack
    assert shared["n1"][2] is None and shared["n3"][2].name == "ib_umad"
    assert [shared[h][3].name for h in ("n1", "n2")] == ["nvidia_n1", "nvidia_n2"]          # facts: per host
    names = {slot[0].name for key, slot in cache._tasks.items() if key[1] == "params"}
    assert "reads the controller's files while it resolves" not in names   # a template renders on every host
    assert "reads another host's variables, which its facts fill in as the run goes" not in names
    assert {params[5].name for params in shared.values()} == {"ib_umad"}
    # a condition read this host's facts: the condition is judged on each host, the params are shared
    assert shared["n2"][6] is None and all(shared[h][6] is shared["n1"][6] for h in ("n3", "n4", "n5"))
    assert [shared[h][7].name for h in ("n1", "n5")] == ["nvidia_n1_x", "nvidia_n5_x"]
    # the params' own lookups include what the condition rendered first: one object per rack
    assert [shared[h][8].name for h in ("n1", "n2", "n4")] == ["mod_r1", "mod_r1", "mod_r2"]
    assert shared["n1"][8] is shared["n2"][8]
