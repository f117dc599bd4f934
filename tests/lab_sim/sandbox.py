"""A throwaway node for tests that need the real dpkg and apt: an overlay of the machine's ``/``.

``run_in_sandbox`` mounts, in private mount and pid namespaces, an overlay whose lower layer
is ``/`` and whose upper layer is a temporary directory; installs the simulators into it,
binds the apt repository, points apt only at it, boots the node and runs a bash script in a
chroot. Everything vanishes with the namespaces; the machine's own dpkg database, services
and kernel are never touched (the overlay's upper directory receives every write).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
REPO_IN_NODE = "/var/lib/gpuconf-lab-repo"

SETUP = r"""
set -e
mount --make-rprivate /
M=$SANDBOX/mnt
mount -t overlay gpuconf-sandbox -o lowerdir=/,upperdir=$SANDBOX/upper,workdir=$SANDBOX/work $M
mount -t proc proc $M/proc
for d in run tmp sys; do mount -t tmpfs tmpfs $M/$d; done
mount -t tmpfs tmpfs $M/proc/driver
mount --rbind /dev $M/dev
mkdir -p $M/var/lib/gpuconf-lab-repo
mount --bind -o ro $REPO $M/var/lib/gpuconf-lab-repo
"$PYTHON" -B -c "
import json, sys
from pathlib import Path
from gpuconf_lab.sim.install import install_image
from gpuconf_lab.repo import source_line
m = Path(sys.argv[1])
install_image(m)
(m / 'etc/gpuconf-lab').mkdir(parents=True, exist_ok=True)
(m / 'etc/gpuconf-lab/node.json').write_text(json.dumps({'name': 'sandbox', 'lab': 'test', 'profile': sys.argv[2], 'index': 0}))
apt = m / 'etc/apt'
(apt / 'sources.list').unlink(missing_ok=True)
for directory in ('sources.list.d', 'preferences.d'):
    for entry in (apt / directory).iterdir():
        entry.unlink()
(apt / 'sources.list.d/gpuconf-lab.list').write_text(source_line('/var/lib/gpuconf-lab-repo'))
" $M $PROFILE
chroot $M /usr/lib/gpuconf-lab/sim/boot prepare
chroot $M /usr/lib/gpuconf-lab/sim/boot start
chroot $M env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
    bash -c 'apt-get -q update >/dev/null 2>&1 || { echo "apt-get update failed"; exit 99; }; bash /dev/stdin' < $SANDBOX/script.sh
"""


def available() -> str | None:
    """None when the sandbox can run here, else why not."""
    if os.geteuid() != 0:
        return "needs root (mount and pid namespaces, overlayfs)"
    for tool in ("unshare", "chroot", "dpkg", "apt-get"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def run_in_sandbox(workdir: Path, repo: Path, script: str, profile: str = "a100", timeout: float = 120) -> str:
    """Run ``script`` (bash) in a fresh sandbox node; returns its stdout+stderr."""
    for name in ("upper", "work", "mnt"):
        (workdir / name).mkdir(parents=True)
    (workdir / "script.sh").write_text(script)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SANDBOX": str(workdir), "REPO": str(repo),
           "PYTHON": sys.executable, "PROFILE": profile, "PYTHONPATH": str(PROJECT), "LANG": "C.UTF-8"}
    done = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--kill-child", "bash", "-c", SETUP],
                          env=env, capture_output=True, text=True, timeout=timeout, cwd=str(PROJECT))
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise AssertionError(f"sandbox exited {done.returncode}:\n{output[-4000:]}")
    return output
