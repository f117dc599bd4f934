"""The tools gpuconf had no parser for (issue 36): dcgmi discovery -l and dcgmi dmon (gpuconf/facts/dcgmi.py),
nvidia-ctk cdi generate's log in both its formats (gpuconf/facts/cdi.py), and dnf's transaction error, EL 10's
modular filtering among them (gpuconf/facts/dnf.py); and where they are read: `gpuconf facts -s dcgm,cdi`, the
cdi_spec task's failure, the package task's failure."""
from __future__ import annotations

from gpuconf.facts.cdi import parse_cdi_generate_log
from gpuconf.facts.common import incomplete
from gpuconf.facts.dcgmi import parse_dcgmi_discovery, parse_dcgmi_dmon
from gpuconf.facts.dnf import parse_dnf_error
from gpuconf.facts.subjects import SUBJECTS
from tests.real import read_real

DISCOVERY = "dcgmi/dcgmi-discovery-l-h100-sxm-name-null-TRUNCATED-dcgm-229.txt"
DMON = "dcgmi/dcgmi-dmon-e-gputl-mcutl-power-tmptr-ecc-fbusd-nautilus-find-string.txt"
CTK_TERMINAL = "nvidia-ctk/cdi-generate-error-minor-number-not-supported-jetson-isaac-ros-163.txt"
CTK_JOURNAL = "nvidia-ctk/journal-nvidia-cdi-refresh-driver-not-loaded-TRUNCATED-toolkit-1611.txt"
DNF_PROBLEM = "dnf/dnf-install-nvidia-open-580-el10-modular-filtering-problem-rocky-201.txt"
DNF_NO_MATCH = "dnf/dnf-install-cuda-drivers-el10-all-matches-filtered-out-modular-rocky-201.txt"
CASES = (DISCOVERY, DMON, CTK_TERMINAL, CTK_JOURNAL, DNF_PROBLEM, DNF_NO_MATCH)


def test_dcgmi_discovery_reads_the_gpu_blocks_and_says_when_fewer_than_announced():
    found = parse_dcgmi_discovery(read_real(DISCOVERY))
    assert found.found == 4 and [(g.gpu_id, g.pci_address) for g in found.gpus] == [
        (0, "0000:4c:00.0"), (1, "0000:5d:00.0")]
    assert found.gpus[0].uuid == "GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de"
    assert found.unnamed == found.gpus  # DCGM printed <<<NULL>>>: a value it could not read, not a name
    assert incomplete(found) == "4 GPUs announced, 2 whole blocks read: cut short"


def test_dcgmi_dmon_reads_fields_units_and_rows():
    dmon = parse_dcgmi_dmon(read_real(DMON))
    assert dmon.fields == ("GPUTL", "MCUTL", "POWER", "TMPTR", "ESVTL", "EDVTL", "FBUSD")
    assert dmon.units == ("", "", "W", "C", "", "", "")
    row = dmon.last(0)
    assert row is not None and row.values["POWER"] == 185.3 and row.values["TMPTR"] == 68.0
    assert row.values["FBUSD"] == 28456.0 and not dmon.problems and not incomplete(dmon)
    na = parse_dcgmi_dmon(read_real(DMON).replace("185.300", "N/A    "))
    assert na.last(0) is not None and na.last(0).values["POWER"] is None
    cut = parse_dcgmi_dmon(read_real(DMON) + "GPU")
    assert incomplete(cut) and len(cut.rows) == 1


def test_nvidia_ctk_cdi_generate_errors_in_either_log_format():
    terminal = parse_cdi_generate_log(read_real(CTK_TERMINAL))
    assert (terminal.mode, terminal.generated) == ("nvml", False)
    assert terminal.errors == ("failed to generate CDI spec: failed to create device CDI specs: failed to generate "
                               "CDI edits for GPU devices: error visiting device: failed to get edits for device: "
                               "failed to create device discoverer: error getting GPU device minor number: "
                               "Not Supported",)
    journal = parse_cdi_generate_log(read_real(CTK_JOURNAL))
    assert journal.mode == "nvml" and journal.errors[0].endswith("failed to initialize NVML: Driver Not Loaded")
    assert journal.warnings[0] == "Failed to init nvsandboxutils: ERROR_NVML_LIB_CALL; ignoring"
    assert "\n" in journal.warnings[1]  # logfmt's \n inside a message is a line break


def test_dnf_modular_filtering_is_named_with_what_to_do():
    problem = parse_dnf_error(read_real(DNF_PROBLEM))
    assert problem.modular_filtering and problem.problems[0].startswith("package nvidia-open-3:580.65.06-1.el10")
    assert [(f.what, f.repo) for f in problem.filtered] == [("nvidia-settings-3:580.65.06-1.el10.x86_64",
                                                             "cuda-rhel10-x86_64")]
    cause = problem.cause()
    assert cause is not None and "modular filtering hides nvidia-settings" in cause and "dnf module reset" in cause
    no_match = parse_dnf_error(read_real(DNF_NO_MATCH))
    assert no_match.no_match == ("cuda-drivers",) and no_match.modular_filtering
    assert parse_dnf_error("Error: Unable to find a match: nvidia-driver-999\n").cause() == \
        "no repository offers nvidia-driver-999"
    assert parse_dnf_error("Complete!\n").cause() is None


def test_the_subjects_read_them():
    dcgm, cdi = SUBJECTS["dcgm"].reads, SUBJECTS["cdi"].reads
    assert dcgm["discovery"].request["argv"] == ["dcgmi", "discovery", "-l"]
    assert dcgm["dmon"].request["argv"][:3] == ["dcgmi", "dmon", "-e"]
    assert cdi["refresh"].request["argv"][:3] == ["journalctl", "-u", "nvidia-cdi-refresh"]
    assert "journal" in SUBJECTS["fabricmanager"].reads
