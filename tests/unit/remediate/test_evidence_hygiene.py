"""Issue 35 LOW, `gpuconf collect`: two collects of one host in the same second keep two bundles; the
bundles and the history are the operator's alone (0600 in 0700 directories); what a collect cut
off by a lost connection left in the host's /tmp is removed by the next one."""
from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from gpuconf.remediate import evidence
from gpuconf.remediate.evidence import Item, collect
from gpuconf.remediate.history import History
from tests.unit.remediate.test_evidence import local  # noqa: F401 - the fixture

TINY = (Item("hello.txt", (("printf", "hello"),), 5, 100),)


def test_two_collects_in_the_same_second_keep_two_bundles(local, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(evidence.time, "time", lambda: 1_800_000_000.0)
    first = collect("node-1", local, tmp_path / "bundles", items=TINY)
    second = collect("node-1", local, tmp_path / "bundles", items=TINY)
    assert first.path != second.path and first.path.exists() and second.path.exists()
    assert sorted(p.name for p in (tmp_path / "bundles").iterdir()) == sorted([first.path.name, second.path.name])


def test_bundles_and_the_history_are_the_operators_alone(local, tmp_path):  # noqa: F811
    state = tmp_path / "state"
    with History(state):
        pass
    bundle = collect("node-1", local, state / "bundles", items=TINY)
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state / "history.sqlite3").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(state / "bundles").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(bundle.path).st_mode) == 0o600


def test_a_collect_removes_what_a_lost_connection_left_on_the_host(local, tmp_path):  # noqa: F811
    left = Path(f"/tmp/gpuconf-collect.lost{os.getpid()}")
    (left / "bundle").mkdir(parents=True, exist_ok=True)
    packed = Path(f"{left}.tar.gz")
    packed.write_bytes(b"half")
    hour_ago = time.time() - 2 * 3600
    for path in (left / "bundle", left, packed):
        os.utime(path, (hour_ago, hour_ago))
    try:
        collect("node-1", local, tmp_path / "bundles", items=TINY)
        assert not left.exists() and not packed.exists()
    finally:
        os.system(f"rm -rf {left} {packed}")
