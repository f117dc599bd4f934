"""Build the lab's local apt repository of simulated NVIDIA, CUDA, InfiniBand and Docker packages.

``build_repo(dest)`` writes a standard repository that real ``apt`` uses, so installs, purges,
holds and ``/etc/apt/preferences.d`` pins behave exactly as on a host:

    dest/pool/main/<package>_<version>_<arch>.deb     (dpkg-deb --root-owner-group)
    dest/dists/gpuconf-lab/main/binary-amd64/Packages[.gz]   (dpkg-scanpackages --multiversion)
    dest/dists/gpuconf-lab/Release                     (unsigned: sources use [trusted=yes])

and nodes use ``deb [trusted=yes] file:<dest> gpuconf-lab main``. Package contents are in
``gpuconf_lab.sim.packages``.

The pin that keeps ``apt-get install cuda`` from pulling a newer toolkit pins the ``cuda``
metapackage itself, not only the toolkit (``cuda`` 12.4.1-1 depends on a *different*
package, ``cuda-toolkit-12-4``, which no pin on ``cuda-toolkit-12-2`` touches)::

    Package: cuda-toolkit-12-2
    Pin: version 12.2.2-1
    Pin-Priority: 1001

    Package: cuda
    Pin: version 12.2.2-1
    Pin-Priority: 1001

    Package: cuda-toolkit-* cuda-12-* cuda-11-*
    Pin: release o=gpuconf-lab
    Pin-Priority: -1

The last stanza forbids every other toolkit (a package pinned below 0 is never installed);
the first two, and a specific stanza always beating the glob, keep 12-2 installable.
``tests/lab_sim/test_repo.py`` proves each part with real apt in a throwaway overlay.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpuconf_lab.sim.packages import Package, all_packages

SUITE = "gpuconf-lab"
COMPONENT = "main"
ARCH = "amd64"

CUDA_PIN_EXAMPLE = """Package: cuda-toolkit-12-2
Pin: version 12.2.2-1
Pin-Priority: 1001

Package: cuda
Pin: version 12.2.2-1
Pin-Priority: 1001

Package: cuda-toolkit-* cuda-12-* cuda-11-*
Pin: release o=gpuconf-lab
Pin-Priority: -1
"""


class RepoError(Exception):
    """Building the repository failed; the message names the package and the tool's output."""


def source_line(dest: Path | str) -> str:
    """The sources.list line a node uses for a repository built at ``dest``."""
    return f"deb [trusted=yes] file:{dest} {SUITE} {COMPONENT}\n"


def stage(package: Package, root: Path) -> None:
    """Lay out one package's files and DEBIAN/ control area under ``root``."""
    for path, (content, mode) in package.files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
        target.chmod(mode)
    for path, link in package.symlinks.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(link, target)
    control = root / "DEBIAN"
    control.mkdir(parents=True, exist_ok=True)
    (control / "control").write_text(package.control())
    if package.conffiles:
        (control / "conffiles").write_text("".join(f"{path}\n" for path in package.conffiles))
    for name, body in package.scripts.items():
        script = control / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)


def build_deb(package: Package, pool: Path, work: Path) -> Path:
    root = work / f"{package.name}_{package.version}"
    stage(package, root)
    out = pool / f"{package.name}_{package.version.replace(':', '%3a')}_{package.architecture}.deb"
    done = subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root), str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RepoError(f"dpkg-deb failed for {package.name} {package.version}: {done.stderr.strip()}")
    return out


def write_release(dists: Path) -> None:
    """An unsigned Release file listing the index files with their sizes and hashes."""
    entries = []
    for path in sorted(dists.rglob("Packages*")):
        data = path.read_bytes()
        entries.append((path.relative_to(dists).as_posix(), len(data), hashlib.md5(data).hexdigest(),
                        hashlib.sha256(data).hexdigest()))
    date = time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime())
    lines = [f"Origin: {SUITE}", f"Label: {SUITE}", f"Suite: {SUITE}", f"Codename: {SUITE}", f"Date: {date}",
             f"Architectures: {ARCH} all", f"Components: {COMPONENT}",
             "Description: gpuconf lab: simulated NVIDIA, CUDA, InfiniBand and Docker packages", "MD5Sum:"]
    lines += [f" {md5} {size:>8} {name}" for name, size, md5, _ in entries]
    lines.append("SHA256:")
    lines += [f" {sha} {size:>8} {name}" for name, size, _, sha in entries]
    (dists / "Release").write_text("\n".join(lines) + "\n")


def build_repo(dest: Path) -> Path:
    """Build every package and the repository indexes into ``dest`` (replacing what was there)."""
    dest = Path(dest)
    for tool in ("dpkg-deb", "dpkg-scanpackages"):
        if shutil.which(tool) is None:
            raise RepoError(f"{tool} is not installed (apt-get install dpkg-dev): the lab's apt repository needs it")
    for stale in ("pool", "dists"):
        shutil.rmtree(dest / stale, ignore_errors=True)
    pool = dest / "pool" / COMPONENT
    pool.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="gpuconf-repo-") as work, \
            ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) * 2)) as builders:
        # one dpkg-deb per package (over a hundred): run them side by side
        list(builders.map(lambda package: build_deb(package, pool, Path(work)), all_packages()))
    index_dir = dest / "dists" / SUITE / COMPONENT / f"binary-{ARCH}"
    index_dir.mkdir(parents=True)
    scan = subprocess.run(["dpkg-scanpackages", "--multiversion", f"pool/{COMPONENT}", "/dev/null"],
                          cwd=dest, capture_output=True, text=True)
    if scan.returncode != 0:
        raise RepoError(f"dpkg-scanpackages failed: {scan.stderr.strip()}")
    (index_dir / "Packages").write_text(scan.stdout)
    with gzip.open(index_dir / "Packages.gz", "wb", compresslevel=9) as handle:
        handle.write(scan.stdout.encode())
    write_release(dest / "dists" / SUITE)
    return dest


if __name__ == "__main__":
    import sys

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "repo")
    build_repo(target)
    print(f"built {target}; sources line: {source_line(target.resolve())}", end="")
