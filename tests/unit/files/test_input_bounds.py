"""Input edge cases (issue 31, defect 7): every file gpuconf reads from the user is a regular
file of at most 16 MiB, templates have a bounded output and a bounded CPU time, numbers are
finite, and INI host ranges are well formed. Each case is a clear error, never a hang or a
traceback.

"Bounded in time" is proven without a timed assertion: the real CLI runs in a subprocess whose
generous timeout (HANG) only fails the test if gpuconf never ends.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

from gpuconf.errors import InventoryError, PlaybookError
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook

HANG = 60  # seconds: far beyond any of these runs; reaching it means gpuconf hung
LIMIT = 16 * 1024 * 1024

PLAY = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: write it
      file: {path: /tmp/gpuconf-bounds-never-written, content: "hello\\n"}
"""
INVENTORY = "all:\n  hosts:\n    node1: {address: 127.0.0.1}\n"


# The real CLI in a subprocess with the template CPU budget at 1 s instead of 10: a CPU bomb is refused
# the same way, for a tenth of the CPU (10 s a bomb, a lot on two shared cores).
SMALL_CPU_BUDGET = ("import sys, gpuconf.templating.bounds as bounds; bounds.CPU_SECONDS = 1.0; "
                    "from gpuconf.cli.main import run; sys.exit(run())")


def gpuconf(*args: str, cwd: Path, small_cpu_budget: bool = False) -> subprocess.CompletedProcess:
    program = ["-c", SMALL_CPU_BUDGET] if small_cpu_budget else ["-m", "gpuconf"]
    try:
        return subprocess.run([sys.executable, *program, *args], capture_output=True, text=True,
                              timeout=HANG, cwd=cwd, stdin=subprocess.DEVNULL,
                              env={k: v for k, v in os.environ.items() if not k.startswith("GPUCONF_")})
    except subprocess.TimeoutExpired:
        pytest.fail(f"gpuconf {' '.join(args)} did not end in {HANG} s: it hangs")


def refused(run: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 1, one clear `gpuconf: error:` line with every word in it, and no traceback."""
    text = run.stdout + run.stderr
    assert "Traceback" not in text, text
    assert "internal error" not in text, text
    assert run.returncode == 1, text
    errors = [line for line in run.stderr.splitlines() if line.startswith("gpuconf: error: ")]
    assert errors, text
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def project(tmp_path: Path, playbook: str = PLAY) -> Path:
    (tmp_path / "site.yml").write_text(playbook)
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    return tmp_path


# -- what is read: only regular files, at most 16 MiB ----------------------------------------

def make_bad(path: Path, kind: str) -> str:
    """Put a file of `kind` at `path`; returns the words the refusal must say."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "zero":
        path.symlink_to("/dev/zero")
        return "not a regular file"
    if kind == "fifo":
        os.mkfifo(path)
        return "not a regular file"
    if kind == "directory":
        path.mkdir()
        return "directory"
    with path.open("wb") as handle:  # sparse: 17 MiB that cost nothing to write
        handle.truncate(LIMIT + 1024 * 1024)
    return "16 MiB"


KINDS = ["zero", "fifo", "directory", "huge"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("verb", ["validate", "check"])
def test_a_playbook_that_is_no_regular_file_or_too_big_is_refused(tmp_path, kind, verb):
    root = project(tmp_path)
    words = make_bad(root / "site.yml", kind)
    line = refused(gpuconf(verb, "site.yml", "-i", "hosts.yml", cwd=root), "site.yml", words)
    assert "16 MiB" in line or kind == "directory", line


@pytest.mark.parametrize("kind", KINDS)
def test_an_inventory_that_is_no_regular_file_or_too_big_is_refused(tmp_path, kind):
    root = project(tmp_path)
    for name in ("hosts.yml", "hosts.ini", "hosts"):
        if kind == "directory":
            continue  # a directory inventory is a directory of sources (as in Ansible): tested with its files
        words = make_bad(root / name, kind)
        refused(gpuconf("validate", "site.yml", "-i", name, cwd=root), name, words)


@pytest.mark.parametrize("kind", ["zero", "fifo", "huge"])  # group_vars/NAME/ is a directory of files, as in Ansible
def test_a_file_inside_an_inventory_directory_is_bounded_too(tmp_path, kind):
    root = project(tmp_path)
    (root / "inv").mkdir()
    (root / "inv" / "hosts.yml").write_text(INVENTORY)
    words = make_bad(root / "inv" / "group_vars" / "all.yml", kind)
    refused(gpuconf("validate", "site.yml", "-i", "inv", cwd=root), "all.yml", words)


@pytest.mark.parametrize("kind", KINDS)
def test_extra_vars_from_a_file_are_bounded(tmp_path, kind):
    root = project(tmp_path)
    words = make_bad(root / "extra.yml", kind)
    refused(gpuconf("validate", "site.yml", "-i", "hosts.yml", "-e", "@extra.yml", cwd=root), "extra.yml", words)


@pytest.mark.parametrize("kind", KINDS)
def test_vars_files_and_role_files_are_bounded(tmp_path, kind):
    root = project(tmp_path, dedent("""\
        - hosts: all
          gather_facts: false
          vars_files: [vars.yml]
          roles: [base]
        """))
    (root / "vars.yml").write_text("a: 1\n")
    (root / "roles" / "base" / "tasks").mkdir(parents=True)
    (root / "roles" / "base" / "tasks" / "main.yml").write_text(PLAY.split("tasks:\n", 1)[1])
    words = make_bad(root / "vars.yml", kind)
    refused(gpuconf("validate", "site.yml", "-i", "hosts.yml", cwd=root), "vars.yml", words)
    (root / "vars.yml").unlink() if not (root / "vars.yml").is_dir() else (root / "vars.yml").rmdir()
    (root / "vars.yml").write_text("a: 1\n")
    words = make_bad(root / "roles" / "base" / "defaults" / "main.yml", kind)
    refused(gpuconf("validate", "site.yml", "-i", "hosts.yml", cwd=root), "main.yml", words)


@pytest.mark.parametrize("kind", ["zero", "fifo", "huge"])
def test_a_template_source_is_bounded(tmp_path, kind):
    """A role's template file is read when the task runs: the task fails with host and task named."""
    root = project(tmp_path, dedent(f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - name: render it
              file: {{path: {tmp_path}/motd, template: motd.j2}}
        """))
    (root / "hosts.yml").write_text("all:\n  hosts:\n    localhost: {}\n")
    words = make_bad(root / "templates" / "motd.j2", kind)
    run = gpuconf("check", "site.yml", "-i", "hosts.yml", "-c", "local", cwd=root)
    text = run.stdout + run.stderr
    assert "Traceback" not in text and "internal error" not in text, text
    assert run.returncode == 4, text
    assert "motd.j2" in text and words in text and "render it" in text and "localhost" in text, text
    assert not (tmp_path / "motd").exists()


def test_a_limit_file_is_bounded(tmp_path):
    root = project(tmp_path)
    words = make_bad(root / "limit.txt", "zero")
    refused(gpuconf("validate", "site.yml", "-i", "hosts.yml", "--limit", "@limit.txt", cwd=root),
            "limit.txt", words)


def test_a_file_of_exactly_the_limit_is_read(tmp_path):
    """The limit is generous and exact: a vars file of 16 MiB (a comment and one value) loads."""
    path = tmp_path / "big.yml"
    body = b"answer: 42\n"
    path.write_bytes(body + b"#" * (LIMIT - len(body) - 1) + b"\n")
    assert path.stat().st_size == LIMIT
    from gpuconf.inventory.hosts import load_vars_file
    assert load_vars_file(path) == {"answer": 42}


# -- templates: bounded output and CPU time -------------------------------------------------

BOMBS = [
    ("{{ lipsum(10**6) }}", "lipsum"),
    ("{{ 'x' * 10**9 }}", "16 MiB"),
    ("{{ [1] * 10**9 }}", "16 MiB"),
    ("{{ 10 ** 1000000000 }}", "too large"),
    ("{{ '%0999999999d' % 1 }}", "16 MiB"),
    ("{{ 'x' | center(10**9) }}", "16 MiB"),
    ("{{ 'x'.ljust(10**9) }}", "16 MiB"),
    ("{{ '{:>999999999}'.format(1) }}", "16 MiB"),
    ("{{ range(100000) | join('x' * 100000) }}", "16 MiB"),
    ("{{ ('x' * 100000) | replace('x', 'y' * 100000) }}", "16 MiB"),
    ("{{ range(10) | batch(10**9, 'x') | list }}", "16 MiB"),
    ("{{ range(10) | slice(10**9) | list }}", "16 MiB"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}{{ 'x' * 100 }}{% endfor %}{% endfor %}", "16 MiB"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "CPU"),
    ("{% set xs = range(100000) | list %}{% for i in xs %}{% for j in xs %}{% endfor %}{% endfor %}", "CPU"),
]


@pytest.mark.parametrize("template, words", BOMBS, ids=[b[0][:40] for b in BOMBS])
def test_a_template_bomb_is_refused_with_its_position(tmp_path, template, words):
    root = project(tmp_path, PLAY.replace('"hello\\n"', repr(template).replace("\\\\", "\\")))
    line = refused(gpuconf("validate", "site.yml", "-i", "hosts.yml", cwd=root, small_cpu_budget=words == "CPU"),
                   words)
    assert "site.yml:4:7: " in line, line  # the task's place, as for every template error
    assert "node1" in line and "write it" in line, line


@pytest.mark.parametrize("template", ["{{ lipsum(10**6) }}", "{{ 'x' * 10**9 }}"])
def test_a_template_bomb_fails_its_task_in_check_with_host_and_task(tmp_path, template):
    root = project(tmp_path, PLAY.replace('"hello\\n"', f'"{template}"'))
    (root / "hosts.yml").write_text("all:\n  hosts:\n    localhost: {}\n")
    run = gpuconf("check", "site.yml", "-i", "hosts.yml", "-c", "local", cwd=root)
    text = run.stdout + run.stderr
    assert "Traceback" not in text and "internal error" not in text, text
    assert run.returncode == 4, text
    assert "FAILED: [localhost] write it" in text and "16 MiB" in text, text


def test_a_template_file_bomb_names_the_file_and_line(tmp_path):
    root = project(tmp_path, dedent(f"""\
        - hosts: all
          gather_facts: false
          tasks:
            - name: render it
              file: {{path: {tmp_path}/motd, template: motd.j2}}
        """))
    (root / "hosts.yml").write_text("all:\n  hosts:\n    localhost: {}\n")
    (root / "templates").mkdir()
    (root / "templates" / "motd.j2").write_text("hello\n{{ lipsum(10**6) }}\n")
    run = gpuconf("check", "site.yml", "-i", "hosts.yml", "-c", "local", cwd=root)
    text = run.stdout + run.stderr
    assert "Traceback" not in text and run.returncode == 4, text
    assert "motd.j2:2" in text and "lipsum" in text, text


def test_ordinary_templates_still_render():
    from gpuconf.templating.render import Vars, render_string
    from gpuconf.templating.template_files import render_file
    variables = Vars({"n": 3, "names": ["a", "b"]})
    assert render_string("{{ 'ab' * n }}", variables) == "ababab"
    assert render_string("{{ 2 ** 10 }}", variables) == 1024
    assert render_string("{{ '%05d' % 42 }}", variables) == "00042"
    assert render_string("{{ names | join(', ') }}", variables) == "a, b"
    assert render_string("{{ 'x' | center(5) }}", variables) == "  x  "
    assert len(render_string("{{ lipsum(2, html=false) }}", variables)) > 10
    text = "{% for i in range(3) %}{{ loop.index }}/{{ loop.length }} {% endfor %}"
    assert render_string(text, variables) == "1/3 2/3 3/3 "
    assert render_file("{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}\n{% endfor %}", variables, "t.j2") == "a=1\n"


# -- numbers: finite ----------------------------------------------------------------------------

TASK = "- hosts: all\n  tasks:\n    - name: t\n"


@pytest.mark.parametrize("body, where", [
    (TASK + "      command: {cmd: ls}\n      timeout: 1e309\n", "5:7"),
    (TASK + "      command: {cmd: ls}\n      timeout: .inf\n", "5:7"),
    (TASK + "      command: {cmd: ls}\n      timeout: .nan\n", "5:7"),
    (TASK + "      command: {cmd: ls}\n      timeout: 1.0e+999\n", "5:7"),
    (TASK + "      command: {cmd: ls, timeout: 1e309}\n", "4:26"),
    (TASK + "      command: {cmd: ls, timeout: .inf}\n", "4:26"),
    ("- hosts: all\n  max_fail_percentage: .nan\n  tasks: []\n", "2:3"),
])
def test_a_number_that_is_not_finite_is_refused(tmp_path, body, where):
    (tmp_path / "site.yml").write_text(body)
    with pytest.raises(PlaybookError) as err:
        load_playbook(tmp_path / "site.yml", project_dir=tmp_path)
    assert str(err.value).startswith(f"{tmp_path}/site.yml:{where}: "), str(err.value)
    assert "finite" in str(err.value), str(err.value)


def test_a_number_that_is_not_finite_is_refused_by_the_cli(tmp_path):
    root = project(tmp_path, TASK + "      command: {cmd: ls}\n      timeout: 1e309\n")
    refused(gpuconf("validate", "site.yml", "-i", "hosts.yml", cwd=root), "site.yml:5:7", "finite")


# -- INI host ranges: well formed -------------------------------------------------------------

@pytest.mark.parametrize("host, column, words", [
    ("node[01:]", 5, "no end"),
    ("node[:03]", 5, "no start"),
    ("node[03:01]", 5, "start after its end"),
    ("node[01:03:0]", 5, "step"),
    ("node[a:03]", 5, "numbers like [01:16]"),
    ("node[01:03", 5, "']'"),
    ("node[]", 5, "numbers like [01:16]"),
    ("node[01:3]", 5, "same width"),
    ("  rack1-node[1:3]x[a:]", 19, "no end"),
    ("node[0:99999999]", 5, "100000"),
])
def test_a_malformed_ini_range_is_refused_with_its_position(tmp_path, host, column, words):
    path = tmp_path / "hosts.ini"
    path.write_text(f"[gpu]\nok1\n{host} port=22\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(str(path))
    assert str(err.value).startswith(f"{path}:3:{column}: "), str(err.value)
    assert words in str(err.value), str(err.value)


def test_a_malformed_ini_range_is_refused_by_the_cli(tmp_path):
    root = project(tmp_path)
    (root / "hosts.ini").write_text("[gpu]\nnode[01:]\n")
    refused(gpuconf("validate", "site.yml", "-i", "hosts.ini", cwd=root), "hosts.ini:2:5", "node[01:]")


@pytest.mark.parametrize("host, names", [
    ("node[01:03]", ["node01", "node02", "node03"]),
    ("node[1:3]x[a:b]", ["node1xa", "node1xb", "node2xa", "node2xb", "node3xa", "node3xb"]),
    ("node[01:05:2]", ["node01", "node03", "node05"]),
    ("node[8:10]", ["node8", "node9", "node10"]),
    ("node[1:1]", ["node1"]),
])
def test_well_formed_ranges_expand_as_in_ansible(tmp_path, host, names):
    path = tmp_path / "hosts.ini"
    path.write_text(f"[gpu]\n{host}\n")
    assert load_inventory(str(path)).group_members("gpu") == names
