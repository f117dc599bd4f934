"""Evidence bundles in the history (schema version 3): collected on their own or by a remediation,
and a version 2 file migrated with its remediations kept."""
from __future__ import annotations

import sqlite3

from gpuconf.remediate.history import FILE, MIGRATIONS, SCHEMA_VERSION, History


def test_a_bundle_on_its_own_and_a_remediations_bundle(tmp_path):
    with History(tmp_path) as history:
        history.add_bundle("gpu-01", "/state/bundles/gpu-01-20261207T000000Z.tar.gz", at=100.0)
        record = history.begin("gpu-02", "gpu-02", "gpuconf: gate: GPU 0: Xid 79", run="r1")
        history.add_bundle("gpu-02", "/state/bundles/gpu-02-20261207T000100Z.tar.gz", remediation=record, at=160.0)
        assert history.bundles() == [("gpu-01", 100.0, "/state/bundles/gpu-01-20261207T000000Z.tar.gz"),
                                     ("gpu-02", 160.0, "/state/bundles/gpu-02-20261207T000100Z.tar.gz")]
        assert [b[2] for b in history.bundles("gpu-01")] == ["/state/bundles/gpu-01-20261207T000000Z.tar.gz"]
        assert [r.bundle for r in history.records()] == ["/state/bundles/gpu-02-20261207T000100Z.tar.gz"]


def test_a_version_2_history_gains_bundles_and_keeps_its_rows(tmp_path):
    db = sqlite3.connect(tmp_path / FILE)
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    db.execute("INSERT INTO schema_version VALUES (2)")
    for statements in MIGRATIONS[:2]:
        for statement in statements:
            db.execute(statement)
    db.execute("INSERT INTO remediations (host, node, started, finding, step, run) "
               "VALUES ('gpu-03', 'gpu-03', 1.0, 'gpuconf: failed: x', 'done', 'old')")
    db.commit()
    db.close()
    with History(tmp_path) as history:
        assert history.version == SCHEMA_VERSION >= 3
        assert [(r.host, r.bundle) for r in history.records()] == [("gpu-03", "")]
        assert history.bundles() == []
