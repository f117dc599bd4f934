"""Controller CPU that scaled with the hosts for no reason: work that every host's thread did again.

Hosts run in threads that reach the same code at the same moment, so a cache that does not make
the others wait (functools.cache) computes once per thread, not once. These tests start the
threads together and count the work done.
"""
from __future__ import annotations

import threading

import yaml

from gpuconf import templating
from gpuconf.driver import catalog
from gpuconf.facts.common import snake_case

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

    monkeypatch.setattr(templating, "_FILES", {})
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


def test_snake_case_is_memoised_and_still_exact():
    assert snake_case("HW Power Brake Slowdown") == "hw_power_brake_slowdown"
    assert snake_case("  Fabric  ") == "fabric" and snake_case("GPU Link Info") == "gpu_link_info"
    hits = snake_case.cache_info().hits
    assert snake_case("HW Power Brake Slowdown") == "hw_power_brake_slowdown"
    assert snake_case.cache_info().hits == hits + 1
