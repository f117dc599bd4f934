"""Controller CPU that scaled with the hosts for no reason: work that every host's thread did again.

Hosts run in threads that reach the same code at the same moment, so a cache that does not make
the others wait (functools.cache) computes once per thread, not once. These tests start the
threads together and count the work done.
"""
from __future__ import annotations

import gc
import subprocess
import sys
import threading

import yaml

from gpuconf.cli.main import main
from gpuconf.driver import catalog
from gpuconf.facts.common import snake_case
from gpuconf.templating import compiled, conditions, render
from gpuconf.templating import template_files as templating

THREADS = 20


def at_once(function) -> list:
    barrier = threading.Barrier(THREADS)
    results: list = [None] * THREADS

    def one(index: int) -> None:
        barrier.wait()
        results[index] = function()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_the_branch_catalog_is_parsed_once_however_many_hosts_ask_at_once(monkeypatch):
    parses = []
    real_load = yaml.load

    def counting_load(*args, **kwargs):
        parses.append(1)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(catalog, "_LOADED", [])
    monkeypatch.setattr(yaml, "load", counting_load)
    results = at_once(catalog.catalog)
    assert len(parses) == 1
    assert all(r is results[0] for r in results) and results[0].get(580) is not None


def test_a_template_file_is_compiled_once_for_every_host(monkeypatch):
    compiles = []
    real_compile = templating.ENV.compile

    def counting_compile(*args, **kwargs):
        compiles.append(1)
        return real_compile(*args, **kwargs)

    monkeypatch.setattr(compiled, "_COMPILED", {})
    monkeypatch.setattr(templating.ENV, "compile", counting_compile)
    text = "export PATH={{ cuda_home }}/bin:$PATH\n{% for x in extra %}{{ x }}\n{% endfor %}"
    rendered = at_once(lambda: templating.render_file(text, {"cuda_home": "/usr/local/cuda", "extra": ["a"]},
                                                      "roles/x/templates/cuda.sh.j2"))
    assert len(compiles) == 1
    assert set(rendered) == {"export PATH=/usr/local/cuda/bin:$PATH\na\n"}
    # a changed file is compiled again; a syntax error still names the file and line
    assert templating.render_file("{{ a }}!", {"a": 1}, "roles/x/templates/cuda.sh.j2") == "1!"
    assert len(compiles) == 2
    try:
        templating.render_file("line\n{% if %}", {}, "roles/x/templates/bad.j2")
    except templating.TemplateError as exc:
        assert exc.location is not None and exc.location.line == 2 and exc.location.file.endswith("bad.j2")
    else:
        raise AssertionError("a syntax error must be refused")


def test_an_inline_template_and_a_condition_are_compiled_once_for_every_host(monkeypatch):
    """The same `{{ ... }}` and `when:` reach every host's thread at the same moment: one compile."""
    compiles = []
    real_compile = templating.ENV.compile

    def counting_compile(*args, **kwargs):
        compiles.append(args[0])
        return real_compile(*args, **kwargs)

    monkeypatch.setattr(compiled, "_COMPILED", {})
    monkeypatch.setattr(templating.ENV, "compile", counting_compile)
    text, condition = "{{ branch | string + '-' + kind }}", "branch | int >= 580 and kind != 'legacy'"
    variables = {"branch": 580, "kind": "open"}
    results = at_once(lambda: (render.render(text, variables), conditions.evaluate_when(condition, variables)))
    assert set(results) == {("580-open", True)}
    assert len(compiles) == 2
    # an expression that does not compile is not kept: every host gets the error
    for _ in range(2):
        try:
            conditions.evaluate_when("branch >=", variables)
        except templating.TemplateError:
            pass
        else:
            raise AssertionError("a syntax error must be refused")
    assert len(compiled._COMPILED) == 2


def test_snake_case_is_memoised_and_still_exact():
    assert snake_case("HW Power Brake Slowdown") == "hw_power_brake_slowdown"
    assert snake_case("  Fabric  ") == "fabric" and snake_case("GPU Link Info") == "gpu_link_info"
    hits = snake_case.cache_info().hits
    assert snake_case("HW Power Brake Slowdown") == "hw_power_brake_slowdown"
    assert snake_case.cache_info().hits == hits + 1


PROGRAM = """
import gc, sys
from gpuconf.cli import main as cli
from gpuconf.engine import runner
from gpuconf.playbook import loader

seen = {}
load, run = loader.load_playbook, runner.Runner.run

def loading(*args, **kwargs):
    seen["loading"] = gc.isenabled()
    return load(*args, **kwargs)

def running(self):
    seen["running"] = gc.isenabled(), gc.get_freeze_count()
    return run(self)

loader.load_playbook, runner.Runner.run = loading, running
sys.argv = ["gpuconf", "check", sys.argv[1], "-i", "h1,", "-c", "local", "--no-retry-file"]
code = cli.run()
print("gc:", code, seen["loading"], *seen["running"])
"""


def test_the_program_collects_no_garbage_during_start_up_and_freezes_it_before_the_hosts(tmp_path):
    """cli.run(): the collector is off while modules, the playbook and the plan load (objects that
    live until exit), and on again, with those frozen out of its walks, once the hosts start."""
    playbook = tmp_path / "site.yml"
    playbook.write_text(f'- hosts: all\n  gather_facts: false\n  tasks:\n    - file: {{path: "{tmp_path}/x", content: "x"}}\n')
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(playbook)], capture_output=True, text=True, timeout=60)
    code, loading, running, frozen = proc.stdout.rpartition("gc: ")[2].split()
    assert (code, loading, running) == ("2", "False", "True"), proc.stderr
    assert int(frozen) > 10_000  # the modules' objects: gpuconf, pydantic, jinja2, paramiko


def test_main_leaves_the_callers_collector_alone(tmp_path):
    """Tests and embedders call main(): nothing is frozen and the collector stays as it was."""
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  gather_facts: false\n  tasks: []\n")
    frozen = gc.get_freeze_count()
    main(["check", str(playbook), "-i", "h1,", "-c", "local", "--no-retry-file"])
    assert gc.isenabled() and gc.get_freeze_count() == frozen
