"""A package manager cut short, as a table: the package listing (and dpkg's journal) in, the
repair change out, first, before any package transaction of the task (tasks/packages.py,
facts/installed.py). The lab test is tests/reliability/test_interrupted_dpkg.py."""
import pytest

from gpuconf.facts.installed import DPKG_ALL, DPKG_JOURNAL, RPM_ALL, VERSIONLOCK
from tests.unit.tasks.test_driver_stack import WANT_580, offering
from tests.unit.tasks.test_driver_stack import check as check_stack
from tests.unit.tasks.test_driver_stack import replies as stack_replies
from tests.unit.tasks.test_tasks_table import check, op_text, shell_reply

ROCKY = {"os": {"family": "RedHat", "major": "9"}}
CONFIGURE = "DEBIAN_FRONTEND=noninteractive dpkg --configure -a --force-confdef --force-confold"


def listing(*rows, journal=(), rpm=None):
    """Replies for the package reads: dpkg-query rows (name, version, abbrev), or rpm rows
    (name, version, arch) on a RHEL host, and the names in /var/lib/dpkg/updates."""
    skipped = shell_reply("")
    return {DPKG_ALL.key: skipped if rpm is not None else shell_reply("".join(f"{n}\t{v}\t{a}\n" for n, v, a in rows)),
            RPM_ALL.key: shell_reply("".join(f"{n}\t{v}\t{a}\n" for n, v, a in rpm)) if rpm is not None else skipped,
            VERSIONLOCK.key: {"exists": False},
            DPKG_JOURNAL.key: {"files": {f"/var/lib/dpkg/updates/{name}": "" for name in journal}}}


def summaries_and_ops(result):
    return [c.summary for c in result.changes], [op_text(op) for c in result.changes for op in c.ops]


CASES = [
    ("half-configured: configure first, then the task's own install",
     listing(("nvidia-dkms-580-open", "580.95.05-1", "iF "), journal=("0000", "0001")),
     ["dpkg was interrupted: nvidia-dkms-580-open half-configured; apply runs `dpkg --configure -a`",
      "install dkms"],
     [CONFIGURE, "apt-get install"]),
    ("unpacked, with the wanted package installed: the repair alone",
     listing(("dkms", "3.0.10-8", "ii "), ("libfoo", "1", "iU ")),
     ["dpkg was interrupted: libfoo unpacked; apply runs `dpkg --configure -a`"], [CONFIGURE]),
    ("half-installed and reinstall-required: configure, then reinstall them",
     listing(("dkms", "3.0.10-8", "ii "), ("libfoo", "1", "iH "), ("libbar", "2", "iiR")),
     ["dpkg was interrupted: libfoo half-installed, libbar reinstall-required; apply runs "
      "`dpkg --configure -a` and `apt-get install --reinstall libfoo libbar`"],
     [CONFIGURE, ("apt-get install", "--reinstall", "-- libfoo libbar")]),
    ("only the journal: every package looks installed, and apt still refuses",
     listing(("dkms", "3.0.10-8", "ii "), journal=("0000", "tmp.i")),
     ["dpkg was interrupted: its journal (/var/lib/dpkg/updates) holds 1 change not yet in its status file; "
      "apply runs `dpkg --configure -a`"], [CONFIGURE]),
    ("triggers pending are apt's own business: in sync",
     listing(("dkms", "3.0.10-8", "it ")), [], []),
    ("a clean host with dkms installed: in sync",
     listing(("dkms", "3.0.10-8", "ii "), journal=("tmp.i",)), [], []),
]


@pytest.mark.parametrize("label,reply,summaries,ops", CASES, ids=[c[0] for c in CASES])
def test_package_task_repairs_an_interrupted_dpkg_first(label, reply, summaries, ops):
    got_summaries, got_ops = summaries_and_ops(check("package", {"name": "dkms"}, reply))
    assert got_summaries == summaries
    assert len(got_ops) == len(ops), got_ops
    for want, actual in zip(ops, got_ops):
        for part in want if isinstance(want, tuple) else (want,):
            assert part in actual, (part, actual)


def test_an_rpm_package_installed_twice_is_removed_by_dnf_and_kernels_are_left_alone():
    rows = [("dkms", "0:3.1.5-1.el9", "noarch"), ("libfoo", "0:1.0-1.el9", "x86_64"),
            ("libfoo", "0:1.1-1.el9", "x86_64"), ("libfoo", "0:1.1-1.el9", "i686"),
            ("kernel-core", "0:5.14.0-427.el9", "x86_64"), ("kernel-core", "0:5.14.0-503.el9", "x86_64"),
            ("gpg-pubkey", "0:a-1", "(none)"), ("gpg-pubkey", "0:b-2", "(none)")]
    summaries, ops = summaries_and_ops(check("package", {"name": "dkms"}, listing(rpm=rows), host=ROCKY))
    assert summaries == ["an rpm transaction was interrupted: libfoo installed twice (1.0-1.el9, 1.1-1.el9); "
                         "apply runs `dnf -y -q remove --duplicates`"]
    assert ops == ["dnf -y -q remove --duplicates"]


def test_a_driver_stack_left_half_configured_is_configured_before_its_transaction():
    from tests.unit.tasks.test_driver_stack import STACK_580_OPEN, converged
    rows = [row if row[0] != "nvidia-dkms-580-open" else (row[0], row[1], "iF ")
            for row in converged(STACK_580_OPEN, "580.95.05-1")]
    verdict = check_stack(WANT_580, stack_replies(rows, offering(580)))
    first, *rest = verdict.changes
    assert first.summary == ("dpkg was interrupted: nvidia-dkms-580-open half-configured; "
                             "apply runs `dpkg --configure -a`")
    assert [op_text(op) for op in first.ops] == [CONFIGURE]
    assert rest and "apt-get install" in op_text(rest[0].ops[-1])   # its own transaction comes after
