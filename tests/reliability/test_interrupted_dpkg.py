"""A node whose dpkg was cut mid-configure (issue 31, defect 3): apt refuses every transaction
("dpkg was interrupted, you must manually run 'dpkg --configure -a'"). A check reports it as
drift, naming the package left half-way; apply repairs it first, naming what it ran, and then
installs what the play wants. The cut is a real one: real dpkg killed while a postinst runs."""
from __future__ import annotations

import pytest

from tests.figures import record_fault
from tests.reliability.helpers import (
    check_run,
    gpuconf,
    no_traceback,
    node_file,
    wait_for,
    write_inventory,
    write_playbook,
)

NODE = "t4-01"
DIR = "/var/tmp/gpuconf-rel/dpkg-cut"
PACKAGE = "gpuconf-rel-cut"
CONTROL = f"""\
Package: {PACKAGE}
Version: 1.0
Architecture: all
Maintainer: gpuconf tests <tests@gpuconf.invalid>
Description: a package whose first configure is cut
"""
# The first configure stops in the middle (as a long DKMS build would) until it is killed.
POSTINST = f"""\
#!/bin/sh
set -e
echo $$ > {DIR}/postinst.pid
echo $PPID > {DIR}/dpkg.pid
[ -e {DIR}/cut ] || sleep 600
exit 0
"""
PLAYBOOK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: dkms installed
      package: {name: dkms, lock_timeout: 30}
"""


def status(lab, package: str) -> str:
    _, out, _ = lab.exec(NODE, ["dpkg-query", "-W", "-f=${db:Status-Abbrev}", package])
    return out.strip()


@pytest.fixture
def cut_dpkg(lab):
    """t4-01 after `dpkg -i` was killed while the package's postinst ran."""
    root = f"{DIR}/{PACKAGE}"
    lab.exec(NODE, ["mkdir", "-p", f"{root}/DEBIAN"])
    lab.exec(NODE, ["sh", "-c", f"cat > {root}/DEBIAN/control"], input=CONTROL)
    lab.exec(NODE, ["sh", "-c", f"cat > {root}/DEBIAN/postinst && chmod 755 {root}/DEBIAN/postinst"], input=POSTINST)
    rc, out, err = lab.exec(NODE, ["dpkg-deb", "--build", root, f"{DIR}/{PACKAGE}.deb"])
    assert rc == 0, out + err
    lab.exec(NODE, f"setsid dpkg -i {DIR}/{PACKAGE}.deb >{DIR}/dpkg.log 2>&1 </dev/null &")
    assert wait_for(lambda: node_file(lab, NODE, f"{DIR}/postinst.pid"), 60), "the postinst never ran"
    pids = [node_file(lab, NODE, f"{DIR}/{name}.pid").strip() for name in ("dpkg", "postinst")]
    lab.exec(NODE, ["kill", "-KILL", *pids])
    assert wait_for(lambda: lab.exec(NODE, ["kill", "-0", pids[0]])[0] != 0, 30), "dpkg survived SIGKILL"
    lab.exec(NODE, ["touch", f"{DIR}/cut"])    # configuring it again goes through
    record_fault("dpkg-interrupted")
    yield
    lab.reset(NODE)


def test_an_interrupted_dpkg_is_drift_and_apply_repairs_it_first(lab, tmp_path, cut_dpkg):
    # what every apt transaction meets on such a node, before gpuconf touches it
    rc, out, err = lab.exec(NODE, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q dkms")
    assert rc != 0 and "dpkg was interrupted, you must manually run 'dpkg --configure -a'" in out + err, out + err
    assert status(lab, PACKAGE) == "iF"
    assert not status(lab, "dkms").startswith("ii")

    inventory = write_inventory(lab, tmp_path / "hosts.yml", [NODE])
    playbook = write_playbook(tmp_path / "site.yml", PLAYBOOK)
    check = check_run(lab, [NODE], playbook, inventory)
    no_traceback(check)
    assert check.code == 2, check.stdout + check.stderr
    task = check.tasks(NODE)["dkms installed"]
    assert task["status"] == "would_change", task
    summaries = [change["summary"] for change in task["changes"]]
    assert summaries[0] == (f"dpkg was interrupted: {PACKAGE} half-configured; "
                            "apply runs `dpkg --configure -a`"), summaries
    assert summaries[1:] == ["install dkms"], summaries
    assert "dpkg was interrupted" in check.stdout

    applied = gpuconf("apply", playbook, inventory)
    no_traceback(applied)
    assert applied.code == 0, applied.stdout + applied.stderr
    assert applied.statuses(NODE) == {"dkms installed": "changed"}
    assert "dpkg was interrupted" in applied.stdout and "dpkg --configure -a" in applied.stdout, applied.stdout
    assert status(lab, PACKAGE) == "ii"
    assert status(lab, "dkms") == "ii"
    rc, audit, err = lab.exec(NODE, ["dpkg", "--audit"])
    assert rc == 0 and audit == "", audit + err

    again = check_run(lab, [NODE], playbook, inventory)
    assert again.code == 0, again.stdout + again.stderr
