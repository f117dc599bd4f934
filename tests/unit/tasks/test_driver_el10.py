"""The driver stack on EL 10 (RHEL, Rocky, Alma 10): no module streams, so NVIDIA's RHEL 10 path
(`dnf install nvidia-open`, `dnf versionlock`): exact-version packages, locked, no `dnf module`.
Reached through the platform (tests/platforms.py ROCKY_10: Rocky Linux 10.0's os-release)."""
from __future__ import annotations

import base64

import pytest

from gpuconf.driver.names import RedHatNames
from gpuconf.facts.installed import VERSIONLOCK
from gpuconf.tasks.base import Refused
from gpuconf.tasks.driver import DNF_NAMES
from tests.platforms import ROCKY_9, ROCKY_10
from tests.unit.tasks.test_driver_stack import A100, WANT_580, check, ops, replies

ROCKY10 = {"os": {"family": "RedHat", "major": "10"}, "gpus": A100, "kernel": "6.12.0-55.12.1.el10_0.x86_64"}
EL10 = "3:580.95.05-1.el10"
OPEN_STACK = ["nvidia-kmod-common", "kmod-nvidia-open-dkms", "nvidia-driver-cuda-libs", "nvidia-driver",
              "nvidia-driver-cuda", "nvidia-open"]


def test_the_platform_picks_the_naming_without_streams_on_el10_only():
    assert ROCKY_10.driver_names == RedHatNames(el="10", streams=False)
    assert ROCKY_9.driver_names == RedHatNames(el="9", streams=True)
    el10 = ROCKY_10.driver_names.stack(580, "580.95.05", "open", "dkms", [])
    el9 = ROCKY_9.driver_names.stack(580, "580.95.05", "open", "dkms", [])
    assert (el10.stream, el10.packages, el10.package_version()) == (None, tuple(OPEN_STACK), EL10)
    assert (el9.stream, "nvidia-open" in el9.packages) == ("580-open", False)
    # proprietary: no nvidia-open metapackage, the proprietary DKMS kmod
    assert "nvidia-open" not in ROCKY_10.driver_names.stack(580, "580.95.05", "proprietary", "dkms", []).packages


def test_an_el10_host_installs_by_package_and_locks_them_with_no_module_stream():
    offered = "".join(f"{n}\t{EL10}\n" for n in DNF_NAMES)
    verdict = check(WANT_580, replies(offered=offered, rpm=[]), host=ROCKY10)
    steps = ops(verdict)
    assert not any("module" in step for step in steps), steps
    assert steps[0].startswith("dnf -y -q install --allowerasing -- nvidia-kmod-common-3:580.95.05-1.el10")
    assert "nvidia-open-3:580.95.05-1.el10" in steps[0]
    assert steps[1].startswith("dnf -q versionlock add") and "nvidia-open-3:580.95.05-1.el10" in steps[1]
    assert len(steps) == 2
    locked = "".join(f"{n}-{EL10}.*\n" for n in OPEN_STACK)
    done = replies(offered=offered, rpm=[(n, EL10) for n in OPEN_STACK])
    done[VERSIONLOCK.key] = {"exists": True, "kind": "file", "content_b64": base64.b64encode(locked.encode()).decode()}
    assert check(WANT_580, done, host=ROCKY10).changes == []


def test_an_el10_host_whose_repository_lacks_the_version_is_refused_before_anything_changes():
    offered = "".join(f"{n}\t3:580.105.08-1.el10\n" for n in DNF_NAMES)
    with pytest.raises(Refused, match=r"not in this host's repositories: nvidia-kmod-common 3:580\.95\.05-1\.el10"
                       r".*\(they offer 3:580\.105\.08-1\.el10\); nothing was changed"):
        check(WANT_580, replies(offered=offered, rpm=[]), host=ROCKY10)
