"""The package task and the dpkg lock: a bounded wait (lock_timeout), then a failure naming the holder."""
import pytest

from gpuconf.tasks.base import Facts
from gpuconf.tasks.packages import PackageParams, lock_error
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
