"""The parsers' contract: never raise. Every public parser gets every real capture (of
every kind, so mostly the wrong kind), each cut at several points, plus odd inputs; each
must return its typed result or Unparseable."""
from __future__ import annotations

import pytest

from gpuconf.facts import dkms, infiniband, kernel, nvidia, packages, systemd
from tests.real import REAL


def sysfs_infiniband_files(text: str):
    """parse_sysfs_infiniband_files with `text` as every file's content."""
    names = ("fw_ver", "board_id", "hca_type", "ports/1/state", "ports/1/phys_state", "ports/1/rate",
             "ports/1/link_layer")
    return infiniband.parse_sysfs_infiniband_files({f"/sys/class/infiniband/x/{n}": text for n in names})


PARSERS = [
    nvidia.parse_gpu_list, nvidia.parse_nvidia_smi_query, nvidia.parse_nvidia_smi_query_xml,
    nvidia.parse_query_csv, nvidia.parse_dmon, nvidia.parse_nvidia_smi_table, nvidia.parse_nvlink_status,
    nvidia.parse_topology, nvidia.parse_nvidia_smi_version, nvidia.detect_nvidia_smi_failure,
    nvidia.parse_proc_driver_version, nvidia.parse_modinfo, nvidia.parse_modinfo_version,
    nvidia.parse_nvcc_version, nvidia.parse_fabric_manager_log, nvidia.find_version_mismatch,
    dkms.parse_dkms_status,
    infiniband.parse_ibstat, infiniband.parse_ibstatus, infiniband.parse_ibv_devinfo,
    infiniband.parse_ibv_devinfo_list, infiniband.parse_numbered_state, infiniband.parse_rate,
    infiniband.parse_sysfs_value, infiniband.parse_carrier_events,
    sysfs_infiniband_files, kernel.parse_proc_modules, kernel.split_kernel_log, kernel.parse_xid_events, kernel.find_nouveau,
    kernel.find_lockups, kernel.decode_taint,
    packages.parse_dpkg_query, packages.parse_dpkg_l, packages.parse_apt_mark,
    packages.parse_apt_mark_showhold, packages.parse_apt_cache_policy,
    systemd.parse_systemctl_show, systemd.parse_systemctl_show_all, systemd.parse_is_active,
    systemd.parse_is_enabled, systemd.parse_list_units, systemd.parse_start_failure,
]

ODD = ["", "\n", "   \n\t\n", "\x00\x01\x02", "GPU 0:", "GPU 00000000:19:00.0\n    PCI\n", "CA 'x'\n\tPort 1:\n",
       "CA 'x'\n\tState: Active\n\tLink layer: Ethernet\n", "/sys/class/infiniband/x/ports/y/state:1\n",
       "hca_id:\n\tport:\tx\n", "=" * 5000, "Link 0: 25 GB/s\n", "+++-\n", "a:\n  b:\n *** 1 x\n", "Xid (PCI:): x",
       "\u2019\u2018\ufffd", "<?xml version='1.0'?><nvidia_smi_log><gpu id='x'><pci/></gpu></nvidia_smi_log>"]


def samples() -> list[str]:
    texts = list(ODD)
    for path in sorted(REAL.rglob("*.txt")):
        text = path.read_text(encoding="utf-8")
        texts += [text, text[: len(text) // 2], text[: len(text) // 3 * 2], text[1:37]]
    return texts


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.__name__)
def test_parser_never_raises(parser) -> None:
    for text in samples():
        parser(text)  # the assertion is that this returns
