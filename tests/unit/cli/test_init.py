"""`gpuconf init DIR`: a site in one command, valid as written, that never overwrites."""
from __future__ import annotations

import yaml

from gpuconf.cli.main import main
from gpuconf.playbook.loader import load_playbook
from gpuconf.release.site import MODELS
from tests.paths import ROOT


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def defaults(role: str) -> dict:
    return yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())


def test_init_writes_a_site_that_validates_from_its_own_directory(tmp_path, monkeypatch, capsys):
    site = tmp_path / "site"
    code, out, _ = run(capsys, "init", str(site))
    assert code == 0 and f"wrote a site in {site} (15 files)" in out
    assert sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()) == sorted(
        ["README.md", "gpuconf.cfg", "inventories/prod/hosts.yml", "inventories/prod/group_vars/all.yml",
         "playbooks/site.yml"] + [f"inventories/prod/group_vars/{m.group}.yml" for m in MODELS]
        + [f"playbooks/{m.group}.yml" for m in MODELS])
    assert not list(tmp_path.glob(".site.gpuconf-init-*"))
    hosts = yaml.safe_load((site / "inventories/prod/hosts.yml").read_text())
    assert set(hosts["all"]["children"]) == {"a100", "h100", "b200", "gb200", "t4", "subnet_managers",
                                             "slurm_controller"}
    driver, cuda = defaults("nvidia_driver"), defaults("cuda")
    for model in MODELS:
        pins = yaml.safe_load((site / f"inventories/prod/group_vars/{model.group}.yml").read_text())
        assert {k: pins[k] for k in ("nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_flavour")} == \
            {k: driver[k] for k in ("nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_flavour")}
        assert (pins["cuda_version"], pins["cuda_package_version"]) == (cuda["cuda_version"],
                                                                         cuda["cuda_package_version"])
        assert pins["drift_timer_playbook"] == model.playbook   # what each node's drift timer checks
        # the site's playbook is the shipped one, which sets no play vars: the group_vars are what runs
        plays = load_playbook(site / "playbooks" / f"{model.group}.yml").plays
        assert len(plays) == 1 and plays[0].hosts == model.group and plays[0].vars == {}, model.group
    monkeypatch.chdir(site)
    code, out, err = run(capsys, "validate", "playbooks/site.yml")
    assert code == 0 and out.startswith("playbooks/site.yml: 5 play(s), ") and "0 host(s): valid" in out, err
    code, out, _ = run(capsys, "inventory", "--graph")    # gpuconf.cfg names inventories/prod
    assert code == 0 and "@slurm_controller" in out and "@t4" in out
    readme = (site / "README.md").read_text()
    assert "gpuconf apply gpuconf-agent.yml" in readme and "gpuconf check playbooks/site.yml" in readme


def test_init_never_overwrites_and_writes_nothing_when_it_refuses(tmp_path, capsys):
    site = tmp_path / "site"
    site.mkdir()
    (site / "gpuconf.cfg").write_text("[defaults]\ninventory = mine\n")
    code, out, err = run(capsys, "init", str(site))
    assert code == 1 and out == ""
    assert err.strip() == f"gpuconf: error: init: {site} is not empty (gpuconf.cfg): gpuconf init never overwrites; " \
                          "give a new directory"
    assert [p.name for p in site.iterdir()] == ["gpuconf.cfg"]
    assert (site / "gpuconf.cfg").read_text() == "[defaults]\ninventory = mine\n"
    (tmp_path / "file").write_text("x")
    code, _, err = run(capsys, "init", str(tmp_path / "file"))
    assert code == 1 and "exists and is not a directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "site"]


def test_init_takes_an_empty_directory(tmp_path, capsys):
    site = tmp_path / "empty"
    site.mkdir()
    code, _, _ = run(capsys, "init", str(site))
    assert code == 0 and (site / "gpuconf.cfg").is_file() and (site / "playbooks" / "t4.yml").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_no_shipped_node_playbook_sets_play_vars_over_a_sites_group_vars():
    for model in MODELS:
        for play in load_playbook(ROOT / "playbooks" / model.playbook).plays:
            assert play.vars == {}, (model.playbook, play.vars)
