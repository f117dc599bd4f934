"""The command line's shared glue, declared once: -l and -f mean the same to every command, the
forks default is one number, and --limit narrows the inventory once for the whole command."""
from __future__ import annotations

import sys
import textwrap

import pytest

from gpuconf.cli.main import build_parser, main
from gpuconf.engine.options import FORKS, RunOptions

PLAY = textwrap.dedent("""\
    - hosts: all
      gather_facts: false
      tasks:
        - name: every host of the inventory is in groups, whatever the limit
          assert: {that: "groups['all'] | length == 3 and play_hosts == ['b']"}
    """)


@pytest.fixture
def project(tmp_path):
    hosts = "".join(f"    {name}: {{python: {sys.executable}}}\n" for name in ("a", "b", "c"))
    (tmp_path / "hosts.yml").write_text(f"all:\n  hosts:\n{hosts}")
    (tmp_path / "site.yml").write_text(PLAY)
    return tmp_path


@pytest.mark.parametrize("argv", [["check", "p.yml"], ["apply", "p.yml"], ["remediate", "p.yml"],
                                  ["run", "all", "-a", "true"]])
def test_limit_and_forks_mean_the_same_to_every_command(argv):
    args = build_parser().parse_args([*argv, "-l", "gpu:!t4", "-f", "7"])
    assert (args.limit, args.forks) == ("gpu:!t4", 7)
    assert build_parser().parse_args(argv).forks is None  # unset: gpuconf.cfg's forks, else FORKS
    assert RunOptions().forks == FORKS


@pytest.mark.parametrize("command", [["check", "p.yml"], ["remediate", "p.yml"], ["run", "all", "-a", "true"]])
def test_forks_below_one_is_refused_by_every_command(command, capsys):
    assert main([*command, "-f", "0"]) == 1
    assert "--forks must be at least 1" in capsys.readouterr().err


def test_limit_narrows_the_run_and_not_the_groups(project, capsys):
    code = main(["check", str(project / "site.yml"), "-i", str(project / "hosts.yml"), "-c", "local", "-l", "b",
                 "--no-retry-file"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "b : ok=1" in out and "a : " not in out and "c : " not in out


def test_an_adhoc_pattern_outside_the_limit_says_so(project, capsys):
    code = main(["run", "a", "-a", "true", "-i", str(project / "hosts.yml"), "-c", "local", "-l", "b"])
    err = capsys.readouterr().err
    assert code == 1 and "'a' matches no host of" in err and "within --limit" in err, err


def test_every_subcommand_has_its_verb():
    """main() dispatches through one table (cli/verbs.py VERBS), not by attribute lookup: each
    subcommand the parser knows has its function there (`lab` is its own program)."""
    import argparse

    from gpuconf.cli.verbs import VERBS

    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) - {"lab"} == set(VERBS)
