"""The evidence bundle's parsers (gpuconf/facts/evidence.py) on real captures."""
from __future__ import annotations

from gpuconf.facts.evidence import parse_bug_report_header, parse_dmidecode, system_identity
from tests.real import read_real

CASES = ("dmidecode/dmidecode-t1-dgx-a100-findstring-18087412309.txt",
         "nvidia-bug-report/bug-report-header-rtx3060-findstring-16252662979.txt")


def test_dmidecode_system_record_of_a_dgx_a100():
    records = parse_dmidecode(read_real(CASES[0]))
    assert [(r.type, r.title) for r in records] == [(1, "System Information")]
    assert records[0].fields["UUID"] == "9f9ffb35-ff5c-03d3-1000-bfde6aa63a00"
    assert system_identity(records) == {"manufacturer": "NVIDIA", "product": "DGXA100 920-23687-2531-001",
                                        "serial": "1571620610013"}


def test_dmidecode_without_a_system_record_names_nothing():
    assert system_identity(parse_dmidecode("# dmidecode 3.4\n")) == {}


def test_bug_report_prologue():
    header = parse_bug_report_header(read_real(CASES[1]))
    assert header is not None and header.version == "31831145"
    assert header.date == "Thu Oct 27 08:50:11 PM -03 2022"
    assert header.uname.startswith("Linux nomade007 6.0.1-arch2-1") and header.flags == ""
    assert parse_bug_report_header(read_real(CASES[0])) is None


def test_a_bundle_names_its_system_and_the_bug_report_script_that_ran(tmp_path):
    import gzip
    import io
    import tarfile

    from gpuconf.remediate.evidence import identity

    bundle = tmp_path / "n1-20261207T000000Z.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        for name, data in (("bundle/dmidecode.txt", read_real(CASES[0]).encode()),
                           ("bundle/nvidia-bug-report.log.gz", gzip.compress(read_real(CASES[1]).encode()))):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    assert identity(bundle) == {"manufacturer": "NVIDIA", "product": "DGXA100 920-23687-2531-001",
                                "serial": "1571620610013", "bug_report": "31831145"}
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(bundle.read_bytes()[:100])
    assert identity(truncated) == {}
