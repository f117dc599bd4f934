"""InfiniBand: HCAs appear with mlx5_ib, ports go ACTIVE only while a subnet manager runs
somewhere in the lab (two nodes share one fabric directory here), and every tool agrees."""
from __future__ import annotations

import pytest

from gpuconf.facts.infiniband import parse_ibstat
from gpuconf.facts.infiniband_sysfs import parse_numbered_state, parse_rate
from gpuconf.facts.infiniband_verbs import parse_ibstatus, parse_ibv_devinfo, parse_ibv_devinfo_list

IB_MODULES = ("mlx5_ib", "ib_uverbs", "ib_umad", "rdma_ucm")


def load_ib(node) -> None:
    for module in IB_MODULES:
        node.run("kmod", "modprobe", module, check=True)


@pytest.fixture
def two_nodes(make_node):
    """Two A100 nodes of one lab with the IB stack loaded and opensm's files installed."""
    nodes = [make_node("a100", name, index) for index, name in enumerate(("sm1", "node2"))]
    for node in nodes:
        load_ib(node)
        node.install("opensm")
    return nodes


def port_state(node, ca: str = "mlx5_0") -> str:
    return node.read(f"/sys/class/infiniband/{ca}/ports/1/state")


def test_no_hcas_before_mlx5_ib(node):
    done = node.run("ib", "ibstat")
    assert done.returncode == 255 and "ibpanic:" in done.stderr and "can't list IB device names" in done.stderr
    assert not node.path("/sys/class/infiniband").exists()
    assert node.run("ib", "ibv_devinfo").stderr == "Failed to get IB devices list: Function not implemented\n"


def test_ports_stay_init_without_a_subnet_manager(node):
    load_ib(node)
    assert port_state(node) == "2: INIT\n"
    assert parse_numbered_state(port_state(node)).name == "INIT"
    assert parse_rate(node.read("/sys/class/infiniband/mlx5_3/ports/1/rate")).gbps == 200.0
    assert node.read("/sys/class/infiniband/mlx5_0/ports/1/phys_state") == "5: LinkUp\n"
    assert node.read("/sys/class/infiniband/mlx5_0/ports/1/link_layer") == "InfiniBand\n"
    text = node.run("ib", "ibstat").stdout
    assert "\t\tState: Initializing\n\t\tPhysical state: LinkUp\n" in text
    ibstat = parse_ibstat(text)
    assert len(ibstat.cas) == 4 and {ca.ports[0].state for ca in ibstat.cas} == {"INITIALIZING"}
    devinfo = parse_ibv_devinfo(node.run("ib", "ibv_devinfo").stdout)
    assert {d.ports[0].state for d in devinfo.devices} == {"PORT_INIT"}
    assert parse_ibv_devinfo_list(node.run("ib", "ibv_devinfo", "-l").stdout) == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")


def test_opensm_on_one_node_activates_every_port_in_the_lab(two_nodes):
    sm, other = two_nodes
    sm.systemctl("start", "opensm", check=True)
    assert sm.systemctl("is-active", "opensm").stdout == "active\n"
    assert port_state(other) == "4: ACTIVE\n" and port_state(sm, "mlx5_3") == "4: ACTIVE\n"
    ca = parse_ibstat(other.run("ib", "ibstat", "mlx5_1").stdout).cas[0]
    assert (ca.ca_type, ca.ports[0].state, ca.ports[0].rate_gbps, ca.ports[0].sm_lid) == ("MT4123", "ACTIVE", 200, 1)
    status = parse_ibstatus(other.run("ib", "ibstatus").stdout)
    assert [port.state.name for port in status] == ["ACTIVE"] * 4
    assert parse_ibv_devinfo(other.run("ib", "ibv_devinfo", "-d", "mlx5_2").stdout).devices[0].ports[0].state == "PORT_ACTIVE"
    assert other.read("/sys/class/infiniband/mlx5_0/ports/1/sm_lid") == "0x1\n"
    assert sm.run("kmod", "rmmod", "ib_umad").stderr == "rmmod: ERROR: Module ib_umad is in use\n"
    sm.systemctl("stop", "opensm", check=True)
    assert port_state(other) == "2: INIT\n"


def test_a_killed_subnet_manager_releases_the_fabric(two_nodes):
    sm, other = two_nodes
    sm.systemctl("start", "opensm", check=True)
    sm.boot()                                   # the reboot kills opensm without any cleanup
    other.run("ib", "ibstat")                   # any simulator run refreshes the shared state
    assert port_state(other) == "2: INIT\n"


def test_opensm_needs_ib_umad_and_an_hca(make_node):
    node = make_node("a100")
    node.install("opensm")
    node.run("kmod", "modprobe", "mlx5_ib", check=True)
    done = node.systemctl("start", "opensm")
    assert done.returncode == 1 and done.stderr.startswith("Job for opensm.service failed")
    journal = node.run("journalctl", "journalctl", "-u", "opensm", "-o", "cat").stdout
    assert "is ib_umad module loaded?" in journal
    node.run("kmod", "rmmod", "mlx5_ib", check=True)
    node.run("kmod", "modprobe", "ib_umad", check=True)
    assert node.read("/sys/class/infiniband_mad/abi_version") == "5\n"     # the class exists without HCAs
    assert node.systemctl("start", "opensm").returncode == 1
    assert "Unable to register class" in node.run("journalctl", "journalctl", "-u", "opensm", "-o", "cat").stdout
    node.run("kmod", "modprobe", "mlx5_ib", check=True)
    node.systemctl("start", "opensm", check=True)


def test_h100_hcas_are_ndr_400(make_node):
    node = make_node("h100")
    load_ib(node)
    assert node.read("/sys/class/infiniband/mlx5_7/ports/1/rate") == "400 Gb/sec (4X NDR)\n"
    assert node.read("/sys/class/infiniband/mlx5_0/hca_type") == "MT4129\n"
    assert len(parse_ibstat(node.run("ib", "ibstat").stdout).cas) == 8


def test_unloading_mlx5_ib_removes_the_devices(node):
    load_ib(node)
    node.run("kmod", "modprobe", "-r", "rdma_ucm", check=True)
    node.run("kmod", "rmmod", "ib_umad", check=True)
    assert not node.path("/sys/class/infiniband_mad").exists()
    assert node.run("kmod", "rmmod", "mlx5_ib").returncode == 0
    assert not node.path("/sys/class/infiniband").exists()
