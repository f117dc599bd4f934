"""Per-lab slurm.conf settings (`Lab.slurm_config`): HealthCheckProgram and its interval reach
every slurmd through `scontrol reconfigure`, and slurmd runs the program in its node."""
from __future__ import annotations

from pathlib import Path

from tests.lab_fixtures import wait_until

PROBE = Path(__file__).with_name("health_probe.sh")   # the nodes see the checkout (their lower `/`)
RAN = "/run/gpuconf-lab-health-probe"


def runs(lab, node: str) -> list[str]:
    rc, out, _ = lab.exec(node, ["cat", RAN])
    return out.splitlines() if rc == 0 else []


def config_lines(text: str) -> dict[str, str]:
    return {key.strip(): value.strip() for key, sep, value in (line.partition("=") for line in text.splitlines())
            if sep}


def test_health_check_settings_reach_every_slurmd_which_runs_the_program_in_its_node(slurm_lab):
    lab = slurm_lab
    nodes = [info.name for info in lab.nodes]
    try:
        settings = lab.slurm_config(HealthCheckProgram=str(PROBE), HealthCheckInterval=1,
                                    HealthCheckNodeState="ANY")
        assert settings == {"HealthCheckProgram": str(PROBE), "HealthCheckInterval": "1",
                            "HealthCheckNodeState": "ANY"}
        shown = config_lines(lab.slurm(["scontrol", "show", "config"]).stdout)
        assert (shown["HealthCheckProgram"], shown["HealthCheckInterval"]) == (str(PROBE), "1 sec")
        rc, out, err = lab.exec(nodes[-1], ["scontrol", "show", "config"])   # the node's configless copy
        assert rc == 0, err
        assert config_lines(out)["HealthCheckProgram"] == str(PROBE)
        # every node runs it, again and again, as root in the node itself
        assert wait_until(lambda: all(len(runs(lab, node)) >= 2 for node in nodes), 60, 0.5), \
            {node: runs(lab, node) for node in nodes}
        assert {line.split()[1] for node in nodes for line in runs(lab, node)[:1]} == set(nodes)
    finally:
        lab.slurm_config(HealthCheckProgram=None, HealthCheckInterval=None, HealthCheckNodeState=None)
        for node in nodes:
            lab.exec(node, ["rm", "-f", RAN])
    shown = config_lines(lab.slurm(["scontrol", "show", "config"]).stdout)
    assert (shown["HealthCheckProgram"], shown["HealthCheckInterval"]) == ("(null)", "0 sec")
