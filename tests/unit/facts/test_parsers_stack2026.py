"""Parsers for the 2026 stack's outputs, on real captures: RHEL-family packages (dnf module
list, rpm -qa), apt-cache policy without its Installed line, DCGM (diag table, health JSON),
IMEX (nvidia-imex-ctl -N, its log, /proc/devices), the NVLink5 fabric manager and nvlsm
logs, nvidia-smi -q excerpts (Fabric health, GSP firmware), nvlink -info firmware,
/proc/driver/nvidia/params, the open module's load banner and persistenced's API mismatch.
Each capture is also cut short, and a cut never yields a confident wrong value."""
from __future__ import annotations

import json

import pytest

from gpuconf.facts.common import incomplete
from gpuconf.facts.dcgm import parse_dcgmi_diag_json, parse_dcgmi_diag_table, parse_dcgmi_health
from gpuconf.facts.imex import parse_imex_ctl_nodes, parse_imex_log, parse_proc_devices
from gpuconf.facts.nvidia.driver import (
    find_api_mismatch,
    parse_proc_driver_params,
    parse_proc_driver_version,
)
from gpuconf.facts.nvidia.fabricmanager import (
    IB_UMAD_NOT_LOADED,
    NO_NVSWITCH,
    NOTHING_TO_DO,
    NVLINK_SM_NOT_RUNNING,
    REFUSED_VERSION,
    parse_fabric_manager_log,
)
from gpuconf.facts.nvidia.nvlink import parse_nvlink_info
from gpuconf.facts.nvidia.query import parse_query_excerpt
from gpuconf.facts.packages import parse_apt_cache_policy
from gpuconf.facts.rpm import parse_dnf_module_list, parse_rpm_qa
from tests.real import read_real as read

FM = "fabricmanager/"
CASES = [
    "apt/apt-cache-policy-cuda-repo-pin-580-TRUNCATED-apt-packaging-fabric-manager-3.txt",
    "dnf/dnf-module-list-nvidia-driver-rhel9-2024-TRUNCATED-dnf5-146.txt",
    "dnf/dnf-module-list-nvidia-driver-rhel9-TRUNCATED-yum-precompiled-kmod-63.txt",
    "dnf/rpm-qa-nvidia-570-and-nvml-mismatch-rhel8-negativo17-171.txt",
    "dcgmi/dcgmi-diag-r3-table-dcgm-3.0.4-TRUNCATED-dcgm-55.txt",
    "dcgmi/dcgmi-health-c-j-transcript-healthy-despite-reset-dcgm-263.txt",
    "imex/imex-ctl-N-gh200-2node-domain-up-jpsnips.txt",
    "imex/imex-daemon-log-570-gh200-jpsnips.txt",
    "imex/proc-devices-nvidia-caps-imex-channels-nvidia-modprobe-9.txt",
    FM + "fabricmanager-log-multicast-team-8gpu-gpud.txt",
    FM + "fabricmanager-start-sh-usage-nvlink5-nvlsm-TRUNCATED-gpu-operator-1595.txt",
    FM + "journal-fm-nothing-to-do-no-nvswitch-cube-studio-29.txt",
    FM + "nvlsm-fm-wrapper-log-b200-TRUNCATED-siderolabs-893.txt",
    FM + "systemctl-status-fm-b200-active-nvlsm-TRUNCATED-bottlerocket-142.txt",
    "nvidia-smi/nvlink-fw-versions-gb200-TRUNCATED-k8s-test-infra-371.txt",
    "nvidia-smi/q-fabric-completed-health-unhealthy-grep-C3-dra-driver-626.txt",
    "nvidia-smi/q-gsp-firmware-na-proprietary-gpud-1074.txt",
    "proc-driver-nvidia-params/params-enablegpufirmware-0-awsome-distributed-ai-17.txt",
    "dmesg/open-kernel-module-load-banner-535.98-TRUNCATED-open-gpu-kernel-modules-543.txt",
    "systemctl/journal-persistenced-api-mismatch-535-TRUNCATED-amazon-ecs-ami-256.txt",
    FM + "journal-fm-precheck-ib-umad-not-loaded-hgx-b200-TRUNCATED-canvos-700.txt",
    FM + "nvlsm-ibwarn-ib-umad-not-loaded-talos-siderolabs-docs-581.txt",
    "dcgmi/dcgmi-diag-r3-json-dcgm-3-TRUNCATED-dcgm-139.txt",
]




def test_apt_policy_without_installed_line_is_not_known_not_none():
    [policy] = parse_apt_cache_policy(read(CASES[0]))
    assert policy.package == "cuda-drivers-fabricmanager" and policy.installed is None
    assert policy.missing == ("installed", "candidate") and not policy.complete  # the cut source line is not read
    assert [v.version for v in policy.versions][:2] == ["550.54.14-1", "545.23.08-1"]
    assert policy.versions[-1].version == "535.129.03-1" and policy.versions[0].priority == -1
    assert {s.priority for v in policy.versions for s in v.sources} == {580}
    assert all(s.origin.endswith("Packages") for v in policy.versions for s in v.sources)  # the cut one dropped


def test_dnf_module_list_streams_flags_and_profiles():
    listing = parse_dnf_module_list(read(CASES[2]))
    assert not listing.complete and incomplete(listing)  # cut after "nvidia-driver  570", no Hint line
    assert [s.stream for s in listing.streams] == ["latest", "latest-dkms", "latest-open-gpu", "open-dkms", "535",
                                                   "535-dkms", "535-open", "535-open-gpu"]
    default = listing.stream("nvidia-driver", "open-dkms")
    assert default is not None and default.default and not default.enabled
    assert listing.stream("nvidia-driver", "535-open").profile_names == ("default", "fm", "ks", "src")
    assert dict(listing.stream("nvidia-driver", "535").profiles)["default"] == "d"
    assert listing.stream("nvidia-driver", "570") is None  # the cut row is not read half
    dnf5 = parse_dnf_module_list(read(CASES[1]))
    assert not dnf5.complete and len(dnf5.streams) == 7 and dnf5.streams[-1].stream == "520"
    assert incomplete(dnf5) == "dnf module list ends before its closing Hint line: cut short"
    whole_rows = read(CASES[2])[: read(CASES[2]).rindex("\n", 0, -1) + 1]   # up to the last whole row
    assert parse_dnf_module_list(whole_rows).streams == listing.streams and incomplete(parse_dnf_module_list(whole_rows))
    assert dnf5.stream("nvidia-driver", "515-open").summary == "Nvidia driver for 515-open branch"


def test_dnf_module_list_whole_with_enabled_stream():
    # SYNTHETIC (documented shape, not a capture): one row as dnf prints an enabled stream with an
    # installed profile, then the Hint line dnf closes every listing with
    text = ("Name           Stream          Profiles                   Summary\n"
            "nvidia-driver  580-open [e]    default [d] [i], fm, ks    Nvidia driver for 580-open branch\n\n"
            "Hint: [d]efault, [e]nabled, [x]disabled, [i]nstalled\n")
    listing = parse_dnf_module_list(text)
    assert listing.complete and listing.streams[0].enabled and listing.streams[0].stream == "580-open"
    assert listing.streams[0].profiles[0] == ("default", "di")
    cut = parse_dnf_module_list(text[: text.index("Hint:")])   # cut at the line end before the Hint
    assert cut.streams == listing.streams and not cut.complete and "Hint" in incomplete(cut)


def test_rpm_qa_names_with_dashes_and_arches():
    packages = parse_rpm_qa(read(CASES[3]))
    assert len(packages) == 22  # the nvidia-smi lines after the listing are not packages
    kmod = next(p for p in packages if p.name.startswith("kmod-nvidia"))
    assert (kmod.name, kmod.version, kmod.release, kmod.arch) == ("kmod-nvidia-4.18.0-553.el8_10", "570.86.16",
                                                                    "1.el8", "x86_64")
    assert {p.version for p in packages if p.name.startswith(("nvidia", "libnvidia"))} == {"570.86.16"}
    assert sum(p.arch == "i686" for p in packages) == 4


def test_dcgmi_diag_table_cut_is_incomplete_and_a_failure_is_named():
    text = read(CASES[4])
    report = parse_dcgmi_diag_table(text)
    assert not report.complete and len(report.tests) == 9 and not report.failed
    assert report.tests[0].category == "Deployment" and report.tests[0].test == "Denylist"
    whole = text[:text.rindex("| PCIe")] + (
        "| PCIe                      | Fail - GPU: 3                                  |\n"
        "|                           | PCIe replay count above threshold              |\n"
        "+---------------------------+------------------------------------------------+\n")
    assert incomplete(parse_dcgmi_diag_table(whole[: whole.rstrip().rindex("\n") + 1]))   # before the border
    report = parse_dcgmi_diag_table(whole)
    assert report.complete and [(t.category, t.test, t.details) for t in report.failed] == [
        ("Integration", "PCIe", "GPU: 3 PCIe replay count above threshold")]


def test_dcgmi_health_json_and_a_cut_one():
    text = read(CASES[5])
    assert parse_dcgmi_health(text).overall == "Healthy"
    assert parse_dcgmi_health(text).incomplete == ""
    assert parse_dcgmi_health(text[: text.index('"value"')]).overall is None  # cut: not known
    last = text.rstrip().rindex("\n") + 1   # the line end before the JSON's closing brace
    cut = parse_dcgmi_health(text[:last])
    assert cut.overall is None and incomplete(cut)


def test_imex_domain_nodes_matrix_and_state():
    text = read(CASES[6])
    domain = parse_imex_ctl_nodes(text)
    assert domain.state == "UP" and domain.complete
    assert [(n.index, n.address, n.state) for n in domain.nodes] == [(0, "10.136.206.47", "READY"),
                                                                     (1, "10.136.206.48", "READY")]
    assert domain.unconnected() == []
    broken = parse_imex_ctl_nodes(text.replace("       1        C  C", "       1        N  C"))
    assert broken.unconnected() == [(1, 0, "N")]
    cut = parse_imex_ctl_nodes(text[: text.index("Domain State")])
    assert cut.state is None and not cut.complete


def test_imex_log_and_proc_devices():
    log = parse_imex_log(read(CASES[7]))
    assert (log.version, log.node_id, log.bind_ip, log.driver_matched, log.peers) == (
        "570.00", 0, "10.136.206.47", True, 2)
    assert parse_proc_devices(read(CASES[8]))["nvidia-caps-imex-channels"] == 234


def test_fabric_manager_nvl5_and_multicast_lines():
    multicast = parse_fabric_manager_log(read(CASES[9]))
    assert multicast.multicast_teams == 1 and multicast.nvswitch_errors[0].code == 12028
    usage = parse_fabric_manager_log(read(CASES[10]))
    assert (usage.system, usage.usage_error) == ("NVL5", "/usr/share/nvidia/nvswitch/fabricmanager.cfg")
    nothing = parse_fabric_manager_log(read(CASES[11]))
    assert (nothing.system, nothing.nothing_to_do, nothing.exit_code) == ("pre-NVL5", True, 1)
    wrapper = parse_fabric_manager_log(read(CASES[12]))
    assert wrapper.management_guid == "0xcc40f3030027f630"
    assert wrapper.nvlsm_build == "OpenSM 2025.06.5_eb3b4ba_df9bb3c_ae214d2"
    active = parse_fabric_manager_log(read(CASES[13]))
    assert (active.management_guid, active.gpu_probes, active.nothing_to_do) == ("0xe09d7303003f3bf8", 1, False)


def test_fabric_manager_refusals_are_named_from_real_lines():
    umad = parse_fabric_manager_log(read(CASES[20]))
    assert (umad.system, umad.refusal.name) == ("NVL5", IB_UMAD_NOT_LOADED)
    assert umad.refusal.line.endswith('Kernel module "ib_umad" has not been loaded, fabric manager cannot be started')
    nvlsm = parse_fabric_manager_log(read(CASES[21]))
    assert nvlsm.refusal.name == IB_UMAD_NOT_LOADED and "is ib_umad module loaded?" in nvlsm.refusal.line
    assert parse_fabric_manager_log(read(CASES[11])).refusal.name == NO_NVSWITCH          # pre-NVL5: no NVSwitch
    mismatch = parse_fabric_manager_log(read(FM + "fm-driver-interface-mismatch-530-gpu-operator-544.txt"))
    assert mismatch.refusal.name == REFUSED_VERSION and "530.30.02" in mismatch.refusal.line
    for healthy in (CASES[9], CASES[12], CASES[13]):
        assert parse_fabric_manager_log(read(healthy)).refusal is None
    # SYNTHETIC (assembled from the real lines above, not one capture): on NVL5, NV_WARN_NOTHING_TO_DO is
    # the NVLink Subnet Manager not running (fabric manager user guide, quoted in siderolabs/extensions PR 717)
    nvl5 = read(CASES[20]).splitlines(keepends=True)[3] + read(CASES[11]).splitlines(keepends=True)[1]
    assert parse_fabric_manager_log(nvl5).refusal.name == NVLINK_SM_NOT_RUNNING
    assert parse_fabric_manager_log(read(CASES[11]).splitlines(keepends=True)[1]).refusal.name == NOTHING_TO_DO
    # a later start clears an earlier refusal
    started = "[Dec 18 2024 19:00:00] [INFO] [tid 1] Fabric Manager version 535.161.08 is running\n"
    assert parse_fabric_manager_log(read(CASES[20]) + started).refusal is None


def test_dcgmi_diag_json_of_dcgm_3_as_captured_and_made_whole():
    text = read(CASES[22])
    posted = parse_dcgmi_diag_json(text)
    assert incomplete(posted) and posted.tests == () and not posted.complete   # as posted: never a pass
    # ASSEMBLED from the capture (not as printed): the reporter's {"..."} dropped, cut after the
    # Hardware category and closed there. DCGM 3's shape: per-GPU results, gpu_id a string.
    whole = text[: text.index('\t\t\t{\n\t\t\t\t"category" : "Stress"')].replace('\t\t\t{"..."},\n', "")
    report = parse_dcgmi_diag_json(whole.rstrip().rstrip(",") + "\n\t\t]\n\t}\n}\n")
    assert report.complete and incomplete(report) == ""
    assert [(t.category, t.test, t.gpu, t.result) for t in report.tests] == [
        ("Integration", "PCIe", 0, "Skip"), ("Hardware", "GPU Memory", 0, "Skip"),
        ("Hardware", "Diagnostic", 0, "Skip"), ("Hardware", "EUD Test", 0, "Skip")]


# SYNTHETIC (documented shape, not a capture: no public dcgmi diag -j output of DCGM 4 was found):
# the keys NVIDIA's schema for DCGM 4's diag JSON requires (NVIDIA/DCGM testing/python3/
# dcgm_diag_schema.json @72fa3fe, 4.6.0), laid out with tabs as dcgmi's writer does.
DCGM4 = {"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{
    "name": "software",
    "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Fail", "warnings": [
                    {"error_category": 6, "error_id": 28, "error_severity": 2,
                     "warning": "Error using CUDA API cudaGetDeviceCount"}]}],
    "test_summary": {"status": "Fail"}}]}]},
    "entity_groups": [{"entities": [{"device_id": "2330", "entity_id": 0}, {"device_id": "2330", "entity_id": 1}],
                       "entity_group": "GPU", "entity_group_id": 1}],
    "metadata": {"version": "4.7.0", "Driver Version Detected": "580.95.05"}}


def test_dcgmi_diag_json_of_dcgm_4_documented_shape():
    text = json.dumps(DCGM4, indent="\t") + "\n"
    report = parse_dcgmi_diag_json(text)
    assert report.complete and report.version == "4.7.0"
    assert [(t.test, t.gpu, t.result) for t in report.tests] == [("software", 0, "Pass"), ("software", 1, "Fail")]
    assert [(t.gpu, t.details) for t in report.failed] == [(1, "Error using CUDA API cudaGetDeviceCount")]
    assert incomplete(parse_dcgmi_diag_json(text[: text.rstrip().rindex("\n") + 1]))   # before the closing brace
    summary_only = json.loads(text)
    summary_only["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"] = []
    assert [(t.test, t.result) for t in parse_dcgmi_diag_json(json.dumps(summary_only)).tests] == [("software", "Fail")]
    broken = {"DCGM Diagnostic": {"runtime_error": "Couldn't find the DCGM diagnostic plugins"}, "metadata": {}}
    assert "could not run: Couldn't find" in incomplete(parse_dcgmi_diag_json(json.dumps(broken)))


def test_nvlink_info_firmware_of_gb200():
    report = parse_nvlink_info(read(CASES[14]))
    assert not report.complete and len(report.gpus) == 2  # cut in GPU 2's header line
    assert report.gpus[1].uuid == "GPU-39ac7bce-e3d6-b426-008e-fa47897c72d5" and report.gpus[1].nvle == "disabled"
    assert report.gpus[0].firmware["MSE"] == "14:4:0" and report.gpus[0].firmware["NETIR"] == "36:2014:1862"


def test_query_excerpts_fabric_health_and_gsp_off():
    fabric = parse_query_excerpt(read(CASES[15])).fabric
    assert fabric is not None and (fabric.state, fabric.status, fabric.clique_id) == ("Completed", "Success", "2")
    assert (fabric.health_summary, fabric.health_bandwidth) == ("Unhealthy", "Full")
    assert fabric.cluster_uuid == "dc6e40c4-d722-4357-9ba6-5291dd461278"
    excerpt = parse_query_excerpt(read(CASES[16]))
    assert excerpt.gsp_firmware_version == "N/A" and excerpt.fabric is None


def test_driver_params_banner_and_api_mismatch():
    assert parse_proc_driver_params(read(CASES[17])) == {"EnableGpuFirmware": "0", "EnableGpuFirmwareLogs": "2"}
    banner = parse_proc_driver_version(read(CASES[18]))
    assert (banner.version, banner.flavour, banner.arch) == ("535.98", "open", "x86_64")
    mismatch = find_api_mismatch(read(CASES[19]))
    assert mismatch is not None and (mismatch.client, mismatch.module) == (None, "535.161.07")  # client line cut


@pytest.mark.parametrize("rel", CASES)
def test_every_cut_of_these_captures_parses_without_a_crash(rel):
    """Cut at 20 points: each parser returns its result type, never raises."""
    text = read(rel)
    parsers = [parse_apt_cache_policy, parse_dnf_module_list, parse_rpm_qa, parse_dcgmi_diag_table,
               parse_dcgmi_health, parse_imex_ctl_nodes, parse_imex_log, parse_proc_devices,
               parse_fabric_manager_log, parse_nvlink_info, parse_query_excerpt, parse_proc_driver_params,
               parse_proc_driver_version, find_api_mismatch]
    for point in range(1, 21):
        cut = text[: len(text) * point // 20]
        for parse in parsers:
            parse(cut)
    half = text[: len(text) // 2]
    if "dnf-module-list" in rel:
        assert not parse_dnf_module_list(half).complete
    if "imex-ctl" in rel:
        assert not parse_imex_ctl_nodes(half).complete
    if "rpm-qa" in rel:  # a line cut mid-name is never a package
        assert set(parse_rpm_qa(half)) <= set(parse_rpm_qa(text))
