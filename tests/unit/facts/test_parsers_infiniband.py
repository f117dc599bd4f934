"""InfiniBand parsers (ibstat, ibstatus, ibv_devinfo, sysfs values, carrier flaps) on
every real capture of those kinds."""
from __future__ import annotations

import pytest

from gpuconf.facts.infiniband import (
    IbRate,
    NumberedState,
    parse_carrier_events,
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_ibv_devinfo_list,
    parse_numbered_state,
    parse_rate,
    parse_sysfs_infiniband_files,
    parse_sysfs_value,
    sysfs_port,
)
from tests.real import read_real as read


def as_printed(rel: str) -> str:
    """gpud's testdata files were stored without the newline the tool printed last; a last
    line without one reads as cut short (gpuconf.facts.common.cut_line), so add it back."""
    text = read(rel)
    return text + "\n" if rel.endswith("-gpud.txt") and not text.endswith("\n") else text


IBSTAT_DIR = "ibstat/"
# file -> (CA count, complete, problem count, first CA (name, type, fw), ports not ACTIVE,
#          (first port state, physical state, rate, link layer, sm lid))
IBSTAT = {
    IBSTAT_DIR + "ibstat-a100-azure-cx6-mt4124-ibpanic-exit255-gpud.txt":
        (8, False, 1, ("mlx5_0", "MT4124", "20.41.1000"), [], ("ACTIVE", "LinkUp", 200.0, "InfiniBand", 1)),
    IBSTAT_DIR + "ibstat-a100-cx6dx-roce-plus-cx7-ib-gpud.txt":
        (9, True, 0, ("mlx5_0", "MT4126", "22.35.2302"), [], ("ACTIVE", "LinkUp", 200.0, "Ethernet", 0)),
    IBSTAT_DIR + "ibstat-bluefield3-bond-MT41692-TRUNCATED-pplx-garden-2.txt":
        (2, True, 0, ("mlx5_bond_0", "MT41692", "32.39.3804"), [], ("ACTIVE", "LinkUp", 200.0, "Ethernet", 0)),
    IBSTAT_DIR + "ibstat-h100-cx7-400-roce-and-cx6dx-all-active-gpud.txt":
        (12, True, 0, ("mlx5_0", "MT4129", "28.39.1002"), [], ("ACTIVE", "LinkUp", 400.0, "Ethernet", 0)),
    IBSTAT_DIR + "ibstat-h100-cx7-ib-some-ports-down-disabled-gpud.txt":
        (12, True, 0, ("mlx5_0", "MT4129", "28.39.1002"), ["mlx5_2", "mlx5_7", "mlx5_8"],
         ("ACTIVE", "LinkUp", 400.0, "InfiniBand", 334)),
    IBSTAT_DIR + "ibstat-h100-cx7-ndr-ib-sm-lid-gpud.txt":
        (9, True, 0, ("mlx5_0", "MT4129", "28.41.1000"), [], ("ACTIVE", "LinkUp", 400.0, "InfiniBand", 1)),
    IBSTAT_DIR + "ibstat-h100-cx7-two-ports-down-polling-gpud.txt":
        (12, True, 0, ("mlx5_0", "MT4129", "28.39.1002"), ["mlx5_11", "mlx5_5"],
         ("ACTIVE", "LinkUp", 400.0, "Ethernet", 0)),
    IBSTAT_DIR + "ibstat-h20-cx6dx-down-rate40-TRUNCATED-sglang-6823.txt":
        (2, True, 0, ("mlx5_0", "MT4125", "22.43.2566"), ["mlx5_0", "mlx5_1"],
         ("DOWN", "Disabled", 40.0, "Ethernet", 0)),
    IBSTAT_DIR + "ibstat-mlx4-dualport-with-ibwarn-debug-lines-TRUNCATED-rdma-core-847.txt":
        (1, False, 4, ("mlx4_0", "MT4099", "2.42.5000"), ["mlx4_0"], ("DOWN", "Disabled", 10.0, "InfiniBand", 13)),
    # ^ a dual-port CA cut after port 1: not the whole listing
}


@pytest.mark.parametrize("rel", sorted(IBSTAT))
def test_ibstat(rel: str) -> None:
    count, complete, problems, (name, ca_type, fw), down, first_port = IBSTAT[rel]
    report = parse_ibstat(as_printed(rel))
    assert (len(report.cas), report.complete, len(report.problems)) == (count, complete, problems)
    ca = report.cas[0]
    assert (ca.name, ca.ca_type, ca.firmware_version) == (name, ca_type, fw)
    port = ca.ports[0]
    assert (port.state, port.physical_state, port.rate_gbps, port.link_layer, port.sm_lid) == first_port
    assert sorted({c.name for c in report.cas for p in c.ports if p.state != "ACTIVE"}) == down


def test_ibstat_details() -> None:
    down = parse_ibstat(read(IBSTAT_DIR + "ibstat-h100-cx7-ib-some-ports-down-disabled-gpud.txt"))
    bad = [(c.name, p.state, p.physical_state, p.rate_gbps) for c in down.cas for p in c.ports if p.state != "ACTIVE"]
    assert [(name, state, phys) for name, state, phys, _ in bad] == [
        ("mlx5_2", "DOWN", "Disabled"), ("mlx5_7", "DOWN", "Disabled"), ("mlx5_8", "DOWN", "Disabled")]
    assert bad[0][3] == 40.0
    polling = parse_ibstat(read(IBSTAT_DIR + "ibstat-h100-cx7-two-ports-down-polling-gpud.txt"))
    states = {c.name: c.ports[0].physical_state for c in polling.cas if c.ports[0].state == "DOWN"}
    assert states == {"mlx5_11": "Polling", "mlx5_5": "Disabled"}
    panic = parse_ibstat(read(IBSTAT_DIR + "ibstat-a100-azure-cx6-mt4124-ibpanic-exit255-gpud.txt"))
    assert panic.problems[0].startswith("ibpanic:") and "mlx5_8" in panic.problems[0]
    mlx4 = parse_ibstat(read(IBSTAT_DIR + "ibstat-mlx4-dualport-with-ibwarn-debug-lines-TRUNCATED-rdma-core-847.txt"))
    ports = mlx4.cas[0].ports
    assert [(p.number, p.state, p.rate_gbps, p.complete) for p in ports] == [
        (1, "DOWN", 10.0, True), (2, "ACTIVE", 56.0, False)]  # port 2 was cut off
    assert all(line.startswith("ibwarn:") for line in mlx4.problems)


def test_ibstatus() -> None:
    ports = parse_ibstatus(read("ibstatus/ibstatus-a100-azure-hdr-200-gpud.txt"))
    assert len(ports) == 9
    first = ports[0]
    assert (first.device, first.port, first.base_lid, first.sm_lid) == ("mlx5_0", 1, 0x33BF, 1)
    assert first.state == NumberedState(4, "ACTIVE") and first.physical_state == NumberedState(5, "LinkUp")
    assert first.rate == IbRate(200.0, "4X", "HDR") and first.link_layer == "InfiniBand"
    assert (ports[-1].device, ports[-1].rate, ports[-1].link_layer) == ("mlx5_8", IbRate(40.0, "4X", "QDR"), "Ethernet")


V = "ibv_devinfo/"
# file -> (device ids, leading problem lines, first device (fw, board_id, port count), first port)
IBV = {
    V + "ibv-devinfo-azure-renamed-rdma-ib-devices-TRUNCATED-azhpc-images-44.txt":
        (["rdmaP23800p0s2", "ibP57247p0s2"], 0, ("14.25.8102", "MSF0010110035", 1),
         ("PORT_ACTIVE", 4, 1024, "Ethernet")),
    V + "ibv-devinfo-cx7-ib-port-active-partial-TRUNCATED-deepep-55.txt":
        (["mlx5_3"], 7, ("28.37.1700", "MT_0000000970", 1), ("PORT_ACTIVE", 4, 4096, "InfiniBand")),
    V + "ibv-devinfo-mlx4-dualport-port2-down-tabs-heioy-books.txt":
        (["mlx4_1", "mlx4_0"], 0, ("2.42.5000", "MT_1090120019", 2), ("PORT_ACTIVE", 4, 4096, "InfiniBand")),
    V + "ibv-devinfo-softroce-rxe0-no-link-layer-rxe-dev-46.txt":
        (["rxe0"], 0, ("0.0.0", None, 1), ("PORT_ACTIVE", 4, 1024, None)),
    V + "ibv-devinfo-v-mlx5-cx5-mlnx-ofed-exp-flags-TRUNCATED-ompi-6137.txt":
        (["mlx5_1"], 0, ("16.23.1020", "MT_0000000008", 1), None),
}


@pytest.mark.parametrize("rel", sorted(IBV))
def test_ibv_devinfo(rel: str) -> None:
    ids, problems, (fw, board, ports), first_port = IBV[rel]
    info = parse_ibv_devinfo(read(rel))
    assert [d.hca_id for d in info.devices] == ids
    assert len(info.problems) == problems
    device = info.devices[0]
    assert (device.fw_ver, device.board_id, device.phys_port_cnt) == (fw, board, ports)
    if first_port is None:
        assert device.ports == ()  # -v excerpt cut before the port block
    else:
        port = device.ports[0]
        assert (port.state, port.state_code, port.active_mtu, port.link_layer) == first_port


def test_ibv_devinfo_details() -> None:
    mlx4 = parse_ibv_devinfo(read(V + "ibv-devinfo-mlx4-dualport-port2-down-tabs-heioy-books.txt"))
    assert [(p.number, p.state, p.active) for p in mlx4.devices[1].ports] == [
        (1, "PORT_ACTIVE", True), (2, "PORT_DOWN", False)]
    verbose = parse_ibv_devinfo(read(V + "ibv-devinfo-v-mlx5-cx5-mlnx-ofed-exp-flags-TRUNCATED-ompi-6137.txt"))
    attrs = verbose.devices[0].attributes
    assert (attrs["max_qp"], attrs["atomic_cap"], attrs["vendor_part_id"]) == ("262144", "ATOMIC_HCA (1)", "4119")
    assert parse_ibv_devinfo_list(read(V + "ibv-devinfo-l-2-hcas-heioy-books.txt")) == ("mlx4_1", "mlx4_0")


S = "sysfs-infiniband/gpud-h100-"
SYSFS = {
    S + "mlx5_0-board_id.txt": "MT_0000000838",
    S + "mlx5_0-fw_ver.txt": "28.41.1000",
    S + "mlx5_0-hca_type.txt": "MT4129",
    S + "mlx5_0-ports-1-link_layer.txt": "InfiniBand",
    S + "mlx5_0-ports-1-phys_state.txt": NumberedState(5, "LinkUp"),
    S + "mlx5_0-ports-1-rate.txt": IbRate(400.0, "4X", "NDR"),
    S + "mlx5_0-ports-1-state.txt": NumberedState(4, "ACTIVE"),
    S + "mlx5_bond_0-board_id.txt": "MT_0000000884",
    S + "mlx5_bond_0-fw_ver.txt": "32.38.3056",
    S + "mlx5_bond_0-hca_type.txt": "MT41692",
    S + "mlx5_bond_0-ports-1-link_layer.txt": "Ethernet",
    S + "mlx5_bond_0-ports-1-phys_state.txt": NumberedState(5, "LinkUp"),
    S + "mlx5_bond_0-ports-1-rate.txt": IbRate(200.0, "2X", "NDR"),
    S + "mlx5_bond_0-ports-1-state.txt": NumberedState(4, "ACTIVE"),
}


@pytest.mark.parametrize("rel", sorted(SYSFS))
def test_sysfs_values(rel: str) -> None:
    text = read(rel)
    if rel.endswith("state.txt"):
        assert parse_numbered_state(text) == SYSFS[rel]
    elif rel.endswith("rate.txt"):
        assert parse_rate(text) == SYSFS[rel]
    else:
        assert parse_sysfs_value(text) == SYSFS[rel]


def test_sysfs_port_assembly() -> None:
    port = sysfs_port("mlx5_0", 1, read(S + "mlx5_0-ports-1-state.txt"), read(S + "mlx5_0-ports-1-phys_state.txt"),
                      read(S + "mlx5_0-ports-1-rate.txt"), read(S + "mlx5_0-ports-1-link_layer.txt"))
    assert port.active and port.rate is not None and port.rate.gbps == 400.0
    down = sysfs_port("mlx5_2", 1, "1: DOWN\n", "3: Disabled\n", "40 Gb/sec (4X QDR)\n", "InfiniBand\n")
    assert not down.active and down.state == NumberedState(1, "DOWN")
    assert parse_rate("garbage") is None and parse_numbered_state("") is None


def test_sysfs_files_read_in_one_batch_from_the_real_captures() -> None:
    # What a file_glob read of /sys/class/infiniband/*/... returns, from the captured files.
    files = {}
    for device in ("mlx5_0", "mlx5_bond_0"):
        for name in ("board_id", "fw_ver", "hca_type"):
            files[f"/sys/class/infiniband/{device}/{name}"] = read(S + device + '-' + name + '.txt').rstrip("\n")
        for name in ("state", "phys_state", "rate", "link_layer"):
            files[f"/sys/class/infiniband/{device}/ports/1/{name}"] = read(S + f"{device}-ports-1-{name}.txt") \
                .rstrip("\n")
    devices = parse_sysfs_infiniband_files(files)
    assert [(d.name, d.hca_type, d.fw_ver) for d in devices] == [
        ("mlx5_0", "MT4129", "28.41.1000"), ("mlx5_bond_0", "MT41692", "32.38.3056")]
    ib, bond = devices[0].ports[0], devices[1].ports[0]
    assert (ib.active, ib.link_layer, ib.rate) == (True, "InfiniBand", IbRate(400.0, "4X", "NDR"))
    assert (bond.active, bond.link_layer, bond.rate) == (True, "Ethernet", IbRate(200.0, "2X", "NDR"))


def test_carrier_flaps_in_syslog() -> None:
    events = parse_carrier_events(read("syslog/ib-link-flap-systemd-networkd-azure-nhc.txt"))
    assert len(events) == 12
    assert [e.up for e in events] == [False] * 6 + [True] * 6
    assert {e.interface for e in events} == {"ib6"}
    assert (events[0].timestamp, events[-1].timestamp) == ("Aug 17 06:18:01", "Aug 17 06:18:06")


CASES = sorted(IBSTAT) + ["ibstatus/ibstatus-a100-azure-hdr-200-gpud.txt"] + sorted(IBV) + [
    V + "ibv-devinfo-l-2-hcas-heioy-books.txt"] + sorted(SYSFS) + ["syslog/ib-link-flap-systemd-networkd-azure-nhc.txt"]


def test_ibv_devinfo_without_ports_is_not_all_active_and_a_missing_port_is_incomplete() -> None:
    none = parse_ibv_devinfo("hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n")
    assert not none.all_ports_active and none.devices[0].ports == ()
    assert not parse_ibv_devinfo("").all_ports_active
    two = ("hca_id:\tmlx4_0\n\tphys_port_cnt:\t\t\t2\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n")
    assert parse_ibv_devinfo(two).incomplete == "mlx4_0: 1 of its 2 ports listed"
    whole = two + "\t\tport:\t2\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
    assert parse_ibv_devinfo(whole).incomplete == "" and parse_ibv_devinfo(whole).all_ports_active


def test_an_ibstat_port_cut_before_its_link_layer_is_not_complete() -> None:
    text = read(IBSTAT_DIR + "ibstat-h100-cx7-ndr-ib-sm-lid-gpud.txt")
    assert not parse_ibstat(text[: text.rindex("Link layer")]).complete
