"""NVIDIA's published release data (gpuconf/driver/releases.py), read from a stored real manifest,
and `gpuconf catalog`, which shows the catalog with its ages and proposes updates from that data."""
from __future__ import annotations

import datetime as dt

import pytest

from gpuconf.cli.main import main
from gpuconf.driver import catalog, releases
from gpuconf.errors import UsageError
from tests.real import REAL, read_real

CASES = ["redist/redistrib_450.203.08.json"]


def test_a_real_manifest_of_the_older_shape_gives_its_version_and_date():
    [release] = releases.read(read_real(CASES[0]), "redistrib_450.203.08.json")
    assert (release.version, release.date, release.branch) == ("450.203.08", dt.date(2022, 10, 19), 450)


def test_the_newer_shape_takes_release_label_and_an_index_page_lists_every_manifest():
    # the first lines of redistrib_620.70.10.json as NVIDIA publishes it, the rest cut for brevity
    head = '{"release_date": "2026-11-23", "release_label": "620.70.10", "release_product": "nvidia-driver"}'
    [newer] = releases.read(head, "redistrib_620.70.10.json")
    assert (newer.version, newer.date) == ("620.70.10", dt.date(2026, 11, 23))
    index = ("redistrib_580.105.08.json\n4.0KB\n2025-11-06 19:20\nredistrib_595.91.07.json\n4.0KB\n2026-08-03 15:01\n"
             '<a href="redistrib_620.70.10.json">redistrib_620.70.10.json</a>   2026-11-23 16:11  4.0KB\n')
    listed = releases.read(index, "index.html")
    assert [(r.version, r.date) for r in listed] == [("580.105.08", dt.date(2025, 11, 6)),
                                                     ("595.91.07", dt.date(2026, 8, 3)),
                                                     ("620.70.10", dt.date(2026, 11, 23))]


def test_proposals_name_only_branches_the_data_shows_newer_and_branches_the_catalog_lacks():
    data = [releases.Release("580.95.05", None, "a"), releases.Release("620.80.01", dt.date(2027, 1, 5), "b"),
            releases.Release("450.203.08", dt.date(2022, 10, 19), "c")]
    lines = releases.proposals(catalog.catalog(), data)
    assert lines[0].startswith("branch 450: not in the catalog (450.203.08)")
    assert lines[1].startswith("branch 620: newest 620.70.10 -> 620.80.01, released 2027-01-05 (b)")
    assert len(lines) == 2                                     # 580.95.05 is older than what the catalog knows


@pytest.mark.parametrize("text, message", [
    ('{"release_date": "2026-11-23", "release_label": "620', "cut short"),
    ('{"release_date": "soon", "release_label": "620.70.10"}', "is not a date"),
    ('{"fabricmanager": {}}', "no driver version"),
    ("<html>nothing here</html>", "not NVIDIA's redist index page"),
])
def test_bad_release_data_is_a_clear_error(text, message):
    with pytest.raises(UsageError, match=message):
        releases.read(text, "f.json")


def test_gpuconf_catalog_shows_status_end_of_life_newest_and_its_age(capsys):
    assert main(["catalog", "--today", "2026-12-17"]) == 0
    out = capsys.readouterr().out
    [r620] = [line for line in out.splitlines() if line.startswith("620 ")]
    assert r620.split()[:6] == ["620", "long-term", "supported", "2029-09-30", "open", "620.70.10"]
    assert "2026-12-07 (10 days ago)" in r620
    assert [line for line in out.splitlines() if line.startswith("535 ")][0].split()[2] == "ended"
    assert "bulletin 5861" in out and "580: 580.178.04" in out


def test_gpuconf_catalog_from_the_stored_manifest_and_from_a_missing_file(capsys):
    assert main(["catalog", "--from-redistrib", str(REAL / CASES[0])]) == 0
    assert "branch 450: not in the catalog (450.203.08)" in capsys.readouterr().out
    assert main(["catalog", "--from-redistrib", "/nonexistent/redistrib.json"]) == 1
    assert "file not found: /nonexistent/redistrib.json" in capsys.readouterr().err
