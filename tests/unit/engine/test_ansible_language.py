"""Ansible's language where ansible-core's integration targets found gpuconf different (issue 38):
real CLI runs on this machine (`-c local` or the implicit localhost), read back from the report."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from gpuconf.cli.main import main
from gpuconf.inventory.hosts import load_inventory
from gpuconf.inventory.patterns import match_hosts


def apply(tmp_path: Path, text: str, *extra: str, inventory: str | None = None) -> tuple[int, dict]:
    playbook = tmp_path / "site.yml"
    playbook.write_text(textwrap.dedent(text))
    if inventory is None:
        (tmp_path / "hosts").write_text("")
        inventory = str(tmp_path / "hosts")
    report = tmp_path / "report.json"
    code = main(["apply", str(playbook), "-i", inventory, "--no-retry-file", "--report", str(report), *extra])
    return code, json.loads(report.read_text())["hosts"] if report.exists() else {}


def shown(host: dict) -> list:
    return [t["shown"] for t in host["tasks"] if t["shown"] is not None]


def test_localhost_named_by_a_play_is_this_machine_outside_every_group(tmp_path):
    (tmp_path / "inv").write_text("[web]\nw1\n")
    inventory = load_inventory(str(tmp_path / "inv"))
    assert match_hosts(inventory, "all") == ["w1"]
    assert match_hosts(inventory, "localhost") == ["localhost"]
    assert match_hosts(inventory, "all") == ["w1"]   # `all` still does not match it
    assert inventory.host_vars("localhost")["ansible_connection"] == "local"
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - debug: {msg: "{{ inventory_hostname }} {{ group_names }}"}
        """)
    assert code == 0
    assert shown(hosts["localhost"]) == [{"msg": "localhost []"}]


def test_a_bare_debug_says_hello_world(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - debug:
        """)
    assert code == 0 and shown(hosts["localhost"]) == [{"msg": "Hello world!"}]


def test_inventory_connection_variables_are_templates(tmp_path):
    (tmp_path / "inv").write_text('[g]\nh1\n[g:vars]\nansible_connection=local\n'
                                  'ansible_python_interpreter="{{ ansible_playbook_python }}"\n')
    code, hosts = apply(tmp_path, """\
        - hosts: g
          gather_facts: false
          tasks:
            - command: "true"
            - debug: {msg: "{{ ansible_playbook_python }}"}
        """, inventory=str(tmp_path / "inv"))
    assert code == 0, hosts
    assert shown(hosts["h1"]) == [{"msg": sys.executable}]


def test_hostvars_carry_set_fact_and_register_of_each_host(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: all
          gather_facts: false
          tasks:
            - set_fact: {mine: "{{ inventory_hostname }}-fact"}
            - command: echo hi
              register: said
        - hosts: all
          gather_facts: false
          tasks:
            - debug: {msg: "{{ hostvars['h1'].mine }} {{ hostvars['h2']['said'].stdout }}"}
        """, "-c", "local", inventory="h1,h2,")
    assert code == 0
    assert shown(hosts["h2"]) == [{"msg": "h1-fact hi"}]


def test_any_errors_fatal_fails_every_host_where_one_failed_and_rescue_recovers_them(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: all
          gather_facts: false
          any_errors_fatal: true
          tasks:
            - block:
                - fail:
                  when: inventory_hostname == 'h1'
                - debug: {msg: never}
              rescue:
                - debug: {msg: rescued}
            - debug: {msg: recovered}
        - hosts: all
          gather_facts: false
          any_errors_fatal: true
          tasks:
            - block:
                - fail:
                  when: inventory_hostname == 'h1'
              always:
                - debug: {msg: always}
            - debug: {msg: never}
        """, "-c", "local", inventory="h1,h2,")
    assert code & 4
    for host in ("h1", "h2"):
        assert [s["msg"] for s in shown(hosts[host])] == ["rescued", "recovered", "always"]



def test_any_errors_fatal_ends_every_host_where_a_dynamic_include_cannot_be_read(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: all
          gather_facts: false
          any_errors_fatal: true
          tasks:
            - include_role: {name: no-such-role}
              when: inventory_hostname == 'h2'
            - debug: {msg: never}
        """, "-c", "local", inventory="h1,h2,")
    assert code & 4
    assert [s["msg"] for s in shown(hosts["h1"]) + shown(hosts["h2"])] == []


def test_a_rescue_sees_the_failed_task_and_its_result(tmp_path):
    (tmp_path / "inner.yml").write_text("- name: inner fail\n  fail: {msg: deep}\n")
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - block:
                - name: boom
                  ansible.builtin.fail: {msg: boom}
              rescue:
                - debug: {msg: "{{ ansible_failed_task.name }} {{ ansible_failed_task.action }} {{ ansible_failed_result.msg }}"}
            - block:
                - block:
                    - include_tasks: inner.yml
                  always:
                    - debug: {msg: "always: {{ ansible_failed_task is defined }}"}
              rescue:
                - debug: {msg: "{{ ansible_failed_task.name }} {{ ansible_failed_result.failed }}"}
        """, "-c", "local")
    assert code == 0
    assert [s["msg"] for s in shown(hosts["localhost"])] == [
        "boom ansible.builtin.fail boom", "always: True", "inner fail True"]


def test_a_public_include_role_exposes_its_vars_and_defaults_after_it_ran(tmp_path):
    for name in ("pub", "priv"):
        (tmp_path / "roles" / name / "vars").mkdir(parents=True)
        (tmp_path / "roles" / name / "defaults").mkdir()
        (tmp_path / "roles" / name / "vars" / "main.yml").write_text(f"{name}_var: v\n")
        (tmp_path / "roles" / name / "defaults" / "main.yml").write_text(f"{name}_default: d\n")
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - debug: {msg: "{{ pub_var is defined }} {{ pub_default is defined }}"}
            - include_role: {name: priv}
            - include_role: {name: pub, public: true}
            - debug: {msg: "{{ pub_var }} {{ pub_default }} {{ priv_var is defined }} {{ priv_default is defined }}"}
        """, "-c", "local")
    assert code == 0
    assert [s["msg"] for s in shown(hosts["localhost"])] == ["False False", "v d False False"]


def test_a_templated_module_name_loads_and_fails_only_where_it_runs(tmp_path):
    play = """\
        - hosts: localhost
          gather_facts: false
          vars: {entire_task: {debug: {msg: x}}}
          tasks:
            - name: never run
              action:
                module: "{{ entire_task }}"
              tags: [TAG]
            - debug: {msg: after}
        """
    code, hosts = apply(tmp_path, play.replace("TAG", "never"), "-c", "local")
    assert code == 0 and [s["msg"] for s in shown(hosts["localhost"])] == ["after"]
    code, hosts = apply(tmp_path, play.replace("TAG", "t"), "-c", "local")
    assert code & 4 and "a module's name is not a template" in hosts["localhost"]["tasks"][0]["error"]


def test_play_vars_and_set_fact_override_a_facts_ansible_name(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          vars: {ansible_os_family: from_play_vars}
          tasks:
            - debug: {msg: "{{ ansible_os_family }} {{ ansible_facts.os_family != 'from_play_vars' }}"}
            - set_fact: {ansible_nodename: from_set_fact}
            - debug: {msg: "{{ ansible_nodename }}"}
        """, "-c", "local")
    assert code == 0
    assert [s["msg"] for s in shown(hosts["localhost"])] == ["from_play_vars True", "from_set_fact"]


def test_an_include_skipped_by_when_registers_as_a_skipped_task(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - include_tasks: nowhere.yml
              loop: "{{ not_defined_at_all }}"
              when: false
              register: skipped_include
            - debug: {msg: "{{ skipped_include.skip_reason }} {{ skipped_include.false_condition }}"}
        """, "-c", "local")
    assert code == 0
    assert [s["msg"] for s in shown(hosts["localhost"])] == ["Conditional result was False False"]


def test_vars_holds_every_variable_the_task_sees(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          vars: {a: 1, b: "{{ a + 1 }}"}
          tasks:
            - debug: {msg: "{{ 'a' in vars }} {{ vars['b'] }} {{ vars[name] }} {{ 'nope' in vars }}"}
              vars: {name: inventory_hostname}
        """, "-c", "local")
    assert code == 0
    assert [s["msg"] for s in shown(hosts["localhost"])] == ["True 2 localhost False"]


def test_a_looped_include_gives_its_tasks_the_loop_and_index_variables(tmp_path):
    (tmp_path / "inner.yml").write_text("- debug: {msg: '{{ ansible_loop_var }}={{ x }} {{ ansible_index_var }}={{ i }}'}\n")
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - include_tasks: inner.yml
              loop: [a, b]
              loop_control: {loop_var: x, index_var: i}
        """, "-c", "local")
    assert code == 0
    assert [s["msg"] for s in shown(hosts["localhost"])] == ["x=a i=0", "x=b i=1"]


def test_a_delegated_task_sees_its_delegates_variables(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - debug: {msg: "{{ ansible_delegated_vars is defined }} {{ ansible_delegated_vars['127.0.0.1'].ansible_host }}"}
              delegate_to: 127.0.0.1
            - debug: {msg: "not delegated: {{ ansible_delegated_vars is defined }}"}
        """, "-c", "local")
    assert code == 0
    assert [s["msg"] for s in shown(hosts["localhost"])] == ["True 127.0.0.1", "not delegated: False"]


def test_an_imported_roles_handlers_are_delegated_with_it(tmp_path):
    role = tmp_path / "roles" / "r"
    (role / "tasks").mkdir(parents=True)
    (role / "handlers").mkdir()
    (role / "tasks" / "main.yml").write_text("- debug: {msg: notifying}\n  changed_when: true\n  notify: h\n")
    (role / "handlers" / "main.yml").write_text("- name: h\n  debug: {msg: 'delegated: {{ ansible_delegated_vars is defined }}'}\n")
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - import_role: {name: r}
              delegate_to: localhost
        """, "-c", "local")
    assert code == 0
    assert [s["msg"] for s in shown(hosts["localhost"])] == ["notifying", "delegated: True"]


def test_a_failure_inside_an_include_that_a_block_rescues_counts_as_rescued(tmp_path):
    (tmp_path / "inner.yml").write_text("- fail: {msg: inner}\n")
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - block:
                - include_tasks: inner.yml
              rescue:
                - debug: {msg: rescued}
        """, "-c", "local")
    assert code == 0
    assert hosts["localhost"]["recap"]["rescued"] == 1 and hosts["localhost"]["recap"]["failed"] == 0


def test_a_template_task_takes_jinjas_settings(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "t.j2").write_text("a: << a >>, kept: {{ a }}\n")
    out = tmp_path / "out.txt"
    code, hosts = apply(tmp_path, f"""\
        - hosts: localhost
          gather_facts: false
          vars: {{a: value}}
          tasks:
            - template: {{src: t.j2, dest: "{out}", variable_start_string: "<<", variable_end_string: ">>"}}
        """, "-c", "local")
    assert code == 0
    assert out.read_text() == "a: value, kept: {{ a }}\n"
    (tmp_path / "templates" / "h.j2").write_text("#jinja2:variable_start_string:'[[', variable_end_string:']]'\n[[ a ]]\n")
    code, hosts = apply(tmp_path, f"""\
        - hosts: localhost
          gather_facts: false
          vars: {{a: value}}
          tasks:
            - template: {{src: h.j2, dest: "{out}"}}
        """, "-c", "local")
    assert code == 0 and out.read_text() == "value\n"

def test_tags_follow_ansibles_rules_and_templated_tags_render(tmp_path):
    play = """\
        - hosts: localhost
          gather_facts: false
          vars: {mine: [t3]}
          tasks:
            - {debug: {msg: tagged}, tags: t1}
            - {debug: {msg: untagged}}
            - {debug: {msg: never}, tags: [never, nv]}
            - {debug: {msg: templated}, tags: "{{ mine }}"}
            - {debug: {msg: "{{ ansible_run_tags }}"}, tags: always}
        """
    cases = {(): ["tagged", "untagged", "templated", ["all"]],
             ("--tags", "untagged"): ["untagged", ["untagged"]],
             ("--tags", "tagged"): ["tagged", "templated", ["tagged"]],
             ("--tags", "nv"): ["never", ["nv"]],
             ("--tags", "t3"): ["templated", ["t3"]],
             ("--skip-tags", "tagged"): ["untagged"]}   # `always` is a tag too
    for args, expected in cases.items():
        code, hosts = apply(tmp_path, play, *args)
        assert code == 0 and [s["msg"] for s in shown(hosts["localhost"])] == expected, args


def test_argument_specs_are_checked_against_every_variable_the_role_sees(tmp_path):
    role = tmp_path / "roles" / "r"
    (role / "meta").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    short_description: Main entry point for role r.\n"
        "    options:\n      size: {type: int, required: true}\n      speed: {choices: [slow, fast]}\n")
    (role / "tasks" / "main.yml").write_text("- debug: {msg: '{{ size }}'}\n")
    play = """\
        - hosts: localhost
          gather_facts: false
          vars: {size: 3}
          roles: [r]
        """
    code, hosts = apply(tmp_path, play)
    tasks = hosts["localhost"]["tasks"]
    assert code == 0 and [t["task"] for t in tasks] == [
        "Validating arguments against arg spec 'main' - Main entry point for role r.", "debug msg={{ size }}"]
    code, hosts = apply(tmp_path, play.replace("vars: {size: 3}", "vars: {speed: warp}"))
    failed = hosts["localhost"]["tasks"][0]
    assert code & 4 and failed["status"] == "failed"
    assert "missing required arguments: size" in failed["error"] and "must be one of: slow, fast" in failed["error"]


def test_group_by_and_add_host_change_the_runs_inventory_for_later_plays(tmp_path):
    code, hosts = apply(tmp_path, """\
        - hosts: localhost
          gather_facts: false
          tasks:
            - group_by: {key: "made_{{ inventory_hostname }}"}
            - add_host: {name: "{{ item }}", groups: [extra], ansible_connection: local, colour: blue}
              loop: [extra1, extra2]
        - hosts: extra
          gather_facts: false
          tasks:
            - debug: {msg: "{{ colour }} {{ groups['made_localhost'] }} {{ groups['extra'] | length }}"}
        """)
    assert code == 0
    for host in ("extra1", "extra2"):
        assert shown(hosts[host]) == [{"msg": "blue ['localhost'] 2"}]
