"""The licence: a LICENSE file (Apache-2.0), named in both distributions' metadata, and the data
gpuconf ships from public sources keeps its origin in the file itself."""
from __future__ import annotations

import csv
import tomllib

import yaml

from tests.paths import ROOT

CATALOGS = ("gpuconf/facts/xid_catalog.csv", "gpuconf/facts/sxid_catalog.csv", "gpuconf/facts/recovery_actions.csv")


def test_the_licence_is_apache_2_and_both_distributions_say_so():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    for pyproject in (ROOT / "pyproject.toml", ROOT / "lab" / "pyproject.toml"):
        project = tomllib.loads(pyproject.read_text())["project"]
        assert project["license"] == "Apache-2.0", pyproject
        for name in project["license-files"]:
            assert (pyproject.parent / name).read_text().startswith(text[:200]) or name == "NOTICE", (pyproject, name)


def test_every_row_of_the_shipped_catalogs_names_its_source():
    notice = (ROOT / "NOTICE").read_text()
    for catalog in CATALOGS:
        assert catalog in notice
        with open(ROOT / catalog, newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows and "source" in rows[0], catalog
        assert [row for row in rows if not (row["source"] or "").strip()] == [], catalog


def test_every_driver_branch_names_its_source():
    branches = yaml.safe_load((ROOT / "gpuconf" / "driver" / "branches.yml").read_text())["branches"]
    assert branches and [b["branch"] for b in branches if not str(b.get("source", "")).strip()] == []
