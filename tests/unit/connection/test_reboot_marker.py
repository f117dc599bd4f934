"""The run lock's holder and the reboot marker beside it (gpuconf/connection/lock.py), run here
as a host runs them: a marker of this boot whose reboot may still come makes the holder answer
`rebooting`, which the controller turns into RebootPending; any other marker is stale."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuconf.connection.base import HostBusy, RebootPending, lock_reply
from gpuconf.connection.lock import BOOT_ID_PATH, holder_command, marker_path


def this_boot() -> str:
    return Path(BOOT_ID_PATH).read_text().strip()


def hold(lock: Path) -> subprocess.Popen:
    return subprocess.Popen(["/bin/sh", "-c", holder_command(sys.executable, str(lock), 0, "gpuconf apply t.yml")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def mark(lock: Path, boot_id: str, until: float) -> None:
    Path(marker_path(str(lock))).write_text(json.dumps({"boot_id": boot_id, "owner": "gpuconf apply r.yml from c "
                                                        "(pid 7, since 10:00:00)", "when": "10:00:01", "until": until}))


def test_a_reboot_pending_on_this_boot_is_answered_and_the_lock_given_up(tmp_path):
    lock = tmp_path / "gpuconf.lock"
    mark(lock, this_boot(), time.time() + 600)
    holder = hold(lock)
    line, _ = holder.communicate(timeout=30)
    assert holder.returncode == 76
    with pytest.raises(RebootPending) as raised:
        lock_reply("t4-01", line, "")
    assert raised.value.boot_id == this_boot()
    assert str(raised.value) == ("t4-01: a reboot started by another gpuconf run (gpuconf apply r.yml from c "
                                 "(pid 7, since 10:00:00); reboot sent at 10:00:01) is pending")
    assert isinstance(raised.value, HostBusy)


@pytest.mark.parametrize("boot_id,until", [("an-earlier-boot", time.time() + 600), (None, time.time() - 1)],
                         ids=["an earlier boot", "a reboot that never came"])
def test_a_stale_marker_is_removed_and_the_lock_taken(tmp_path, boot_id, until):
    lock = tmp_path / "gpuconf.lock"
    mark(lock, boot_id or this_boot(), until)
    holder = hold(lock)
    assert holder.stdout.readline().startswith("locked")
    assert not Path(marker_path(str(lock))).exists()
    holder.communicate("", timeout=30)
    assert holder.returncode == 0


def test_the_rebooting_runs_holder_keeps_the_lock_after_its_channel_closes_until_the_deadline(tmp_path):
    lock = tmp_path / "gpuconf.lock"
    holder = hold(lock)
    assert holder.stdout.readline().startswith("locked")
    owner = (tmp_path / "gpuconf.lock.owner").read_text()
    Path(marker_path(str(lock))).write_text(json.dumps({"boot_id": this_boot(), "owner": owner, "when": "10:00:01",
                                                        "until": time.time() + 2}))
    holder.stdin.close()   # the controller has gone; the host has not (yet)
    waiting = hold(lock)
    line = waiting.stdout.readline()
    assert line.startswith("rebooting "), line   # the lock is still held, and the reboot announced
    waiting.wait(timeout=30)
    holder.wait(timeout=30)   # past the deadline the reboot never came: the marker goes, the lock with it
    assert not Path(marker_path(str(lock))).exists()
    again = hold(lock)
    assert again.stdout.readline().startswith("locked")
    again.communicate("", timeout=30)
