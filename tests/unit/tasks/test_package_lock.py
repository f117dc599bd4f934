"""The package task and the dpkg lock: a bounded wait (lock_timeout), then a failure naming the holder."""
import pytest

from gpuconf.errors import TaskError
from gpuconf.facts.base import Output
from gpuconf.facts.installed import Unfinished
from gpuconf.tasks.base import Facts
from gpuconf.tasks.packages import AptBackend, PackageParams, apply_ops, lock_error
from gpuconf.tasks.registry import TASK_TYPES
from tests.platforms import DEBIAN_12

APT_WAITED = ("Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 "
              "(unattended-upgr)...\nE: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), "
              "is another process using it?")
DPKG_REFUSED = "dpkg: error: dpkg frontend lock was locked by another process with pid 977\nE: Sub-process dpkg"


def nothing_installed(params: PackageParams) -> Facts:
    """A dpkg-query that lists nothing: every package is missing."""
    reads = TASK_TYPES["package"].reads(params)
    return Facts({f.key: f.parse({"out": "", "err": "", "rc": 0, "timed_out": False}) for f in reads}, reads, {}, platform=DEBIAN_12)


@pytest.mark.parametrize("lock_timeout, option", [(None, "DPkg::Lock::Timeout=120"), (5, "DPkg::Lock::Timeout=5")])
def test_apt_waits_for_the_lock_as_long_as_lock_timeout(lock_timeout, option):
    params = PackageParams(name="dkms", **({} if lock_timeout is None else {"lock_timeout": lock_timeout}))
    check = TASK_TYPES["package"].check(params, nothing_installed(params))
    command = check.changes[0].ops[0].request["cmd"]
    assert f"-o {option} " in command
    assert check.changes[0].ops[0].request["timeout"] > params.lock_timeout  # the wait fits in the op's timeout


def test_a_negative_lock_timeout_is_refused():
    with pytest.raises(ValueError, match="lock_timeout"):
        PackageParams(name="dkms", lock_timeout=-1)


@pytest.mark.parametrize("output, words", [
    (APT_WAITED, ["held by process 4242 (unattended-upgr)", "waited 7 s", "left it alone"]),
    (DPKG_REFUSED, ["held by process 977", "left it alone"]),
    ("E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend)", ["held by another process"]),
])
def test_a_held_lock_is_said_plainly_with_the_holder(output, words):
    message = lock_error(output, 7)
    for word in words:
        assert word in message, message


def test_other_failures_are_not_mistaken_for_the_lock():
    assert lock_error("E: Unable to locate package nvidia-driver-999", 7) is None


class Answers:
    """apply_ops' side of a host: each op sent gets the next canned output (what apt-mark or dpkg
    printed); the requests sent are kept, as the wire would carry them."""

    def __init__(self, *outputs):
        self.outputs, self.sent = list(outputs), []

    def execute(self, ops, explains_failures=False):
        self.sent += [dict(op.request) for op in ops]
        return [self.outputs.pop(0) for _ in ops]


def test_a_hold_apt_mark_did_not_report_fails_and_the_names_stay_off_the_wire():
    host = Answers(Output("nvidia-utils-580 set on hold.\n"))
    with pytest.raises(TaskError, match="apt-mark did not hold libnvidia-compute-580"):
        apply_ops(host, [AptBackend().hold(["nvidia-utils-580", "libnvidia-compute-580"], True)], 120)
    assert host.sent[0]["cmd"] == "apt-mark hold nvidia-utils-580 libnvidia-compute-580"
    assert set(host.sent[0]) == {"op", "cmd", "timeout", "check"}   # the names apt-mark must hold are apply's own


def test_dpkg_configure_is_said_not_to_wait_for_the_lock():
    host = Answers(Output("", DPKG_REFUSED, rc=2))
    with pytest.raises(TaskError, match=r"held by process 977: waited 0 s"):
        apply_ops(host, AptBackend().repair((Unfinished("nvidia-dkms-580-open", "half-configured", False),)), 120)
    assert "lock_wait" not in host.sent[0]


def test_dnfs_modular_filtering_is_said_with_what_to_do():
    from gpuconf.tasks.packages import DnfBackend
    from tests.real import read_real

    refused = read_real("dnf/dnf-install-nvidia-open-580-el10-modular-filtering-problem-rocky-201.txt")
    host = Answers(Output("", refused, rc=1))
    with pytest.raises(TaskError, match=r"modular filtering hides nvidia-settings-3:580.65.06-1.el10.x86_64 "
                                        r"\(from cuda-rhel10-x86_64\).*dnf module reset nvidia-driver"):
        apply_ops(host, [DnfBackend().install(["nvidia-open-3:580.65.06"], False, 120)], 120)
