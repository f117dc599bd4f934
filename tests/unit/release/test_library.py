"""The GPU library ships with gpuconf: a playbook is found by name from any directory (a local file
of that name wins, and -v says which ran), a site's playbook imports the shipped ones by name, and
`gpuconf roles` lists the shipped roles and playbooks."""
from __future__ import annotations

import pytest

from gpuconf.cli.main import main
from gpuconf.errors import PlaybookError
from gpuconf.playbook.loader import load_playbook
from gpuconf.release.library import find_playbook, playbook_names, shipped_playbooks, shipped_roles
from tests.paths import ROOT

LOCAL_PLAY = "- name: the site's own\n  hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: local}\n"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_checkout_ships_its_top_level_roles_and_playbooks():
    assert shipped_roles() == ROOT / "roles" and shipped_playbooks() == ROOT / "playbooks"
    assert {"a100-node.yml", "gpu-health.yml", "t4-inference.yml"} <= set(playbook_names())


def test_a_shipped_playbook_is_found_by_name_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for given in ("a100-node.yml", "a100-node", "playbooks/a100-node.yml"):
        choice = find_playbook(given)
        assert choice is not None and choice.shipped and choice.path == ROOT / "playbooks" / "a100-node.yml", given
    assert find_playbook("elsewhere/a100-node.yml") is None and find_playbook("/nowhere/a100-node.yml") is None
    assert load_playbook("a100-node.yml").plays[0].name == "HGX A100 node"


def test_a_local_file_of_that_name_wins_and_v_says_which_ran(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "check", "gpu-health.yml", "-i", "n1,", "--list-hosts", "-v")
    assert code == 0
    assert f"playbook: {ROOT / 'playbooks' / 'gpu-health.yml'} (shipped with gpuconf " in err
    (tmp_path / "gpu-health.yml").write_text(LOCAL_PLAY)
    code, out, err = run(capsys, "check", "gpu-health.yml", "-i", "n1,", "--list-hosts", "-v")
    assert code == 0 and "the site's own" in out
    assert "playbook: gpu-health.yml (a local file)" in err


def test_an_unknown_playbook_names_the_shipped_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "check", "a100-nodes.yml", "-i", "n1,")
    assert code == 1 and err.strip() == "gpuconf: error: playbook not found: a100-nodes.yml (did you mean 'a100-node.yml'?)"
    code, _, err = run(capsys, "validate", "ours.yml", "-i", "n1,")   # near no shipped name
    assert code == 1 and "playbook not found: ours.yml (gpuconf ships a100-node.yml, " in err


def test_a_site_playbook_imports_a_shipped_one_by_name_and_its_own_file_first(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "a100.yml").write_text("- import_playbook: a100-node.yml\n")
    plays = load_playbook(site / "a100.yml").plays
    assert [p.name for p in plays] == ["HGX A100 node"]
    (site / "a100-node.yml").write_text(LOCAL_PLAY)
    assert [p.name for p in load_playbook(site / "a100.yml").plays] == ["the site's own"]
    (site / "bad.yml").write_text("- import_playbook: a100-nod.yml\n")
    with pytest.raises(PlaybookError, match="import_playbook: 'a100-nod.yml' not found .*gpuconf ships no playbook"):
        load_playbook(site / "bad.yml")


def test_the_retry_file_of_a_shipped_playbook_goes_to_the_current_directory(tmp_path, monkeypatch, capsys):
    # a check of this machine that fails (no driver 1.2.3 is loaded): the retry file is written, and not
    # into the installed package
    monkeypatch.chdir(tmp_path)
    shipped_retry = shipped_playbooks() / "gpu-health.retry"
    before = shipped_retry.stat().st_mtime_ns if shipped_retry.exists() else None   # a lab test's run by path may have left one
    code, out, _ = run(capsys, "check", "gpu-health.yml", "-c", "local", "-i", "vm,", "-e", "nvidia_driver_version=1.2.3")
    assert code & 4, out
    assert (tmp_path / "gpu-health.retry").read_text() == "vm\n"
    assert (shipped_retry.stat().st_mtime_ns if shipped_retry.exists() else None) == before


def test_roles_lists_the_shipped_roles_and_playbooks_from_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "roles")
    assert code == 0
    assert {line.split()[0] for line in out.splitlines() if line.strip()} >= {"nvidia_driver", "cuda", "drift_timer"}
    # the playbook's own folder (here the current one) is searched too, as Ansible searches it
    assert f"roles path: {tmp_path.resolve()}, {ROOT / 'roles'}" in out
    assert "playbooks shipped with gpuconf" in out and "a100-node.yml, " in out


def test_the_image_inventory_is_found_from_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)   # an image build runs `gpuconf apply a100-node.yml -i image` anywhere
    code, out, err = run(capsys, "check", "a100-node.yml", "-i", "image", "--list-hosts")
    assert code == 0, err
    assert "localhost" in out
