"""IMEX in the product: the domain probe's verdicts on the real `nvidia-imex-ctl -N` capture and
on peers down, the IMEX channel task as a table, and the peer list the imex role renders from
an inventory group."""
from __future__ import annotations

import pytest

from gpuconf.driver import names
from gpuconf.facts import gather
from gpuconf.facts.imex import parse_imex_ctl_nodes
from gpuconf.tasks.base import Unknown
from gpuconf.tasks.health.imex_domain import judge_domain, peers_down
from gpuconf.tasks.imex import CHANNEL0, CHANNEL0_STATE, NVIDIA_IN_INITRAMFS
from gpuconf.tasks.initramfs import initramfs_fact
from gpuconf.templating.render import Vars, render_string
from tests.paths import ROOT
from tests.real import read_real
from tests.unit.tasks.health.fakes import files, run_probe, shell
from tests.unit.tasks.test_tasks_table import assert_changes, check, missing, stat

DEVICES = "195 nvidia\n195 nvidiactl\n234 nvidia-caps-imex-channels (major number)\n509 nvidia-nvswitch\n"


def capture() -> str:
    return read_real("imex/imex-ctl-N-gh200-2node-domain-up-jpsnips.txt")


def with_peer_down(text: str) -> str:
    return (text.replace("Node #1   - 10.136.206.48   - READY", "Node #1   - 10.136.206.48   - UNAVAILABLE")
            .replace("       0        C  C", "       0        C  N").replace("       1        C  C", "       1        N  N")
            .replace("Domain State: UP", "Domain State: DEGRADED"))


def test_the_real_domain_passes_naming_its_nodes():
    findings = judge_domain(parse_imex_ctl_nodes(capture()), "imex_domain")
    assert [f.severity for f in findings] == ["ok"]
    assert findings[0].message == "IMEX domain UP: 2 nodes READY and connected (10.136.206.47, 10.136.206.48)"


def test_a_peer_down_is_a_warning_naming_it():
    domain = parse_imex_ctl_nodes(with_peer_down(capture()))
    assert peers_down(domain) == ["10.136.206.48 (node #1, UNAVAILABLE, connectivity N)"]
    assert [(f.severity, f.message) for f in judge_domain(domain, "imex_domain")] == [
        ("warning", "IMEX peer not connected: 10.136.206.48 (node #1, UNAVAILABLE, connectivity N)")]


def test_all_ready_but_a_disconnected_pair_names_both_ends():
    domain = parse_imex_ctl_nodes(capture().replace("       1        C  C", "       1        D  C"))
    assert peers_down(domain) == ["10.136.206.48 -> 10.136.206.47 (node #1 to #0: D)"]


def test_output_cut_short_is_unknown():
    with pytest.raises(Unknown, match="cut short"):
        judge_domain(parse_imex_ctl_nodes(capture().split("Domain State")[0]), "imex_domain")


def gb200_pci() -> dict:
    found = {}
    for bus in ("01", "02", "03", "04"):
        directory = f"/sys/bus/pci/devices/0000:{bus}:00.0"
        found.update({f"{directory}/vendor": "0x10de", f"{directory}/class": "0x030200",
                      f"{directory}/device": "0x2941"})
    return {gather.PCI_FACT.key: files(found)}


def test_probe_on_a_rack_tray_is_drift_naming_the_peer_and_ok_when_up():
    verdict, _ = run_probe("health_imex_domain", {}, {**gb200_pci(), "imex:-N": shell(with_peer_down(capture()))})
    assert [c.summary for c in verdict.changes] == [
        "IMEX peer not connected: 10.136.206.48 (node #1, UNAVAILABLE, connectivity N)"]
    assert [f.severity for f in verdict.findings] == ["warning"]
    verdict, _ = run_probe("health_imex_domain", {}, {**gb200_pci(), "imex:-N": shell(capture())})
    assert not verdict.changes and verdict.findings[0].severity == "ok"


def test_probe_says_why_when_the_daemon_does_not_answer_and_waits_for_the_tool():
    down = shell(rc=1, err="Connection to the IMEX command service failed\n")
    verdict, _ = run_probe("health_imex_domain", {}, {**gb200_pci(), "imex:-N": down})
    assert verdict.changes and "does not answer nvidia-imex-ctl -N: Connection to the IMEX" in verdict.message
    verdict, _ = run_probe("health_imex_domain", {}, {**gb200_pci(), "imex:-N": shell(rc=127)})
    assert [c.summary for c in verdict.changes] == [
        "IMEX domain: judged once nvidia-imex is installed (no nvidia-imex-ctl yet)"]
    _, unknown = run_probe("health_imex_domain", {}, {**gb200_pci(), "imex:-N": shell(timed_out=True, rc=-9)})
    assert unknown is not None and "did not answer within 10 s" in str(unknown)


def test_probe_passes_on_a_node_that_is_no_rack_tray():
    from tests.unit.tasks.health.fakes import pci
    verdict, _ = run_probe("health_imex_domain", {}, {**pci(), "imex:-N": shell(capture())})
    assert not verdict.changes and "not a rack NVLink tray" in verdict.message


CONF = "/etc/modprobe.d/nvidia-imex-channels.conf"
WANTED = "# IMEX channel 0 at every load of nvidia (gpuconf, role imex)\noptions nvidia NVreg_CreateImexChannel0=1\n"
NO_INITRD_MODULE = {NVIDIA_IN_INITRAMFS.key: {"exists": True, "files": {}},
                    initramfs_fact(None).key: {"exists": True, "files": {}}}
CHANNEL = {CHANNEL0_STATE.key: {"exists": True, "kind": "other", "mode": 0o666, "owner": "root", "group": "root"}}


@pytest.mark.parametrize("name, replies, summaries, ops", [
    ("fresh, driver loaded: option and channel now",
     {**missing(CONF), **stat("/proc/devices", DEVICES), **missing(CHANNEL0, with_content=False), **NO_INITRD_MODULE},
     [f"{CONF}: options nvidia NVreg_CreateImexChannel0=1 (channel0 at every load of nvidia)",
      f"{CHANNEL0} missing: create it (char 234:0)"],
     [f"write {CONF} 0644", "mkdir /dev/nvidia-caps-imex-channels", f"mknod -m 0666 {CHANNEL0} c 234 0"]),
    ("driver not loaded: the module makes it at its next load",
     {**stat(CONF, WANTED), **stat("/proc/devices", "1 mem\n"), **missing(CHANNEL0, with_content=False),
      **NO_INITRD_MODULE},
     [f"{CHANNEL0}: made by the nvidia module at its next load (no nvidia-caps-imex-channels in /proc/devices: "
      "the driver is not loaded)"], []),
    ("nvidia in the initramfs without the option: rebuilt",
     {**stat(CONF, WANTED), **stat("/proc/devices", DEVICES), **CHANNEL,
      NVIDIA_IN_INITRAMFS.key: {"exists": True, "files": {"usr/lib/modules/6.1.0-18-amd64/updates/dkms/nvidia.ko": ""}},
      initramfs_fact(None).key: {"exists": True, "files": {"etc/modprobe.d/nouveau.conf": "blacklist nouveau\n"}}},
     ["initramfs for 6.1.0-18-amd64 loads nvidia without NVreg_CreateImexChannel0=1: "
      "update-initramfs -u -k 6.1.0-18-amd64"], ["update-initramfs -u -k 6.1.0-18-amd64"]),
])
def test_imex_channel(name, replies, summaries, ops):
    result = check("imex_channel", {}, replies, host={"kernel": "6.1.0-18-amd64", "os": {"family": "Debian"}})
    assert_changes(result, summaries, ops)


def test_imex_channel_in_sync_says_why():
    replies = {**stat(CONF, WANTED), **stat("/proc/devices", DEVICES), **CHANNEL, **NO_INITRD_MODULE}
    result = check("imex_channel", {}, replies, host={"kernel": "6.1.0-18-amd64"})
    assert not result.changes and result.message.startswith(f"{CHANNEL0} present")


def test_nvidia_imex_is_one_name_everywhere_and_a_driver_package():
    namings = (names.DebianNames(), names.RedHatNames())
    assert {naming.companion("imex", b) for naming in namings for b in (580, 595)} == {"nvidia-imex"}
    assert names.is_driver_package("nvidia-imex")


def test_the_role_renders_the_peer_list_from_the_group():
    template = (ROOT / "roles/imex/templates/nodes_config.cfg.j2").read_text()
    hostvars = {"a": {"address": "10.0.0.1"}, "b": {"ansible_host": "10.0.0.2"}, "c": {}}
    text = render_string(template, Vars({"groups": {"rack1": ["a", "b", "c"]}, "hostvars": hostvars,
                                         "imex_domain_group": "rack1"}))
    assert text.splitlines()[1:] == ["10.0.0.1", "10.0.0.2", "c"] and text.endswith("c\n")
