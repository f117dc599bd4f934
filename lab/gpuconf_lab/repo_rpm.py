"""Build the lab's local dnf repository for EL nodes: real RPMs, repodata and, for EL 9, module streams.

``build_rpm_repo(dest, el="9")`` writes what NVIDIA's CUDA repository for RHEL 9 looks like to dnf:

    dest/Packages/<name>-<version>-<release>.<arch>.rpm    (rpmbuild -bb, one spec per package)
    dest/repodata/repomd.xml, primary, filelists, other     (createrepo_c)
    dest/repodata/*-modules.yaml.gz                         (modifyrepo_c --mdtype=modules)

The module metadata has one modulemd v2 document per ``nvidia-driver`` stream (``580-open``,
``580-dkms``, ..., ``latest-dkms``, ``open-dkms``) listing its packages as artifacts, so that
dnf's modular filtering shows only the enabled (or default) stream's driver packages, and a
modulemd-defaults document making ``open-dkms`` the default stream and ``default`` the default
profile of each. EL 10 (``el="10"``) has no driver module streams, so its repository has no
module metadata at all: dnf offers every driver version, and only a versionlock holds one.
Nodes use ``baseurl=file://<dest>`` (``/etc/yum.repos.d/gpuconf-lab.repo``).
Package contents are in ``gpuconf_lab.sim.rpm_packages`` and ``gpuconf_lab.sim.rpm_system``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpuconf_lab.sim import rpm_packages, rpm_system
from gpuconf_lab.sim.rpm_packages import MODULE, Rpm

REPO_ID = "gpuconf-lab"
MODULE_VERSION = 20260101000000
MODULE_CONTEXT = "5b4a9e7c"
RPMBUILD_DEFINES = {
    "_build_id_links": "none", "debug_package": "%{nil}", "__os_install_post": "%{nil}",
    "_binary_payload": "w2.gzdio", "_buildhost": "gpuconf-lab.invalid", "_source_date_epoch_from_changelog": "0",
}
TOOLS = {"rpmbuild": "rpm", "createrepo_c": "createrepo-c", "modifyrepo_c": "createrepo-c"}
MODULAR = ("8", "9")      # the EL versions whose NVIDIA driver comes as module streams


class RpmRepoError(Exception):
    """Building the repository failed; the message names the package and the tool's output."""


def repo_file(dest: Path | str, el: str = "9") -> str:
    """/etc/yum.repos.d/gpuconf-lab.repo for a repository built at ``dest``."""
    return (f"[{REPO_ID}]\nname=gpuconf lab (simulated BaseOS, EPEL and cuda-rhel{el}-x86_64)\n"
            f"baseurl=file://{dest}\nenabled=1\ngpgcheck=0\nmetadata_expire=never\n")


def spec_text(package: Rpm, stage: Path) -> str:
    lines = [f"Name: {package.name}", f"Version: {package.version}", f"Release: {package.release}"]
    if package.epoch is not None:
        lines.append(f"Epoch: {package.epoch}")
    lines += [f"Summary: {package.summary}", f"License: {package.license}", "AutoReqProv: no"]
    if package.arch == "noarch":
        lines.append("BuildArch: noarch")
    for tag, values in (("Requires", package.requires), ("Provides", package.provides),
                        ("Conflicts", package.conflicts), ("Obsoletes", package.obsoletes)):
        lines += [f"{tag}: {value}" for value in values]
    lines += ["", "%description", package.description or package.summary, "", "%install"]
    if package.files or package.symlinks:
        lines.append(f"cp -a {stage}/. %{{buildroot}}/")
    lines += ["", "%files", "%defattr(-,root,root,-)"]
    for path in sorted([*package.files, *package.symlinks]):
        lines.append(f"%config(noreplace) {path}" if path in package.config else path)
    for section in ("pre", "post", "preun", "postun"):
        if section in package.scripts:
            lines += ["", f"%{section}", package.scripts[section].rstrip("\n")]
    return "\n".join(lines) + "\n"


def stage_files(package: Rpm, stage: Path) -> None:
    for path, (content, mode) in package.files.items():
        target = stage / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
        target.chmod(mode)
    for path, link in package.symlinks.items():
        target = stage / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(link, target)


def build_rpm(package: Rpm, out: Path, work: Path) -> Path:
    """rpmbuild one package into ``out`` (flat), returning the file."""
    top = work / f"{package.name}-{package.version}-{package.release}"
    stage = top / "stage"
    stage.mkdir(parents=True)
    stage_files(package, stage)
    spec = top / f"{package.name}.spec"
    spec.write_text(spec_text(package, stage))
    argv = ["rpmbuild", "-bb", "--quiet", "--define", f"_topdir {top}", "--define", f"_rpmdir {top}/RPMS",
            "--define", "_rpmfilename %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm"]
    for key, value in RPMBUILD_DEFINES.items():
        argv += ["--define", f"{key} {value}"]
    if package.arch != "noarch":
        argv += ["--target", package.arch]
    done = subprocess.run([*argv, str(spec)], capture_output=True, text=True,
                          env=dict(os.environ, HOME=str(top), LC_ALL="C"))
    built = top / "RPMS" / package.filename
    if done.returncode != 0 or not built.is_file():
        output = (done.stderr or done.stdout).strip()[-2000:]
        raise RpmRepoError(f"rpmbuild failed for {package.name} {package.evr}: {output}")
    target = out / package.filename
    shutil.move(str(built), target)
    return target


def build_rpms(packages: list[Rpm], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpuconf-rpm-") as work, ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda package: build_rpm(package, out, Path(work)), packages))


def modules_yaml(packages: list[Rpm]) -> str:
    """modulemd v2 documents, one per nvidia-driver stream, and the modulemd-defaults."""
    docs = []
    for stream in rpm_packages.stream_names():
        artifacts = sorted(p.nevra for p in packages if stream in p.streams)
        if not artifacts:
            continue
        profiles = rpm_packages.stream_profiles(stream)
        lines = ["---", "document: modulemd", "version: 2", "data:", f"  name: {MODULE}", f'  stream: "{stream}"',
                 f"  version: {MODULE_VERSION}", f'  context: "{MODULE_CONTEXT}"', "  arch: x86_64",
                 f"  summary: Nvidia driver for {stream} branch", "  description: >-",
                 f"    Nvidia driver for {stream} branch", "  license:", "    module:", "    - MIT",
                 "  dependencies:", "  - buildrequires:", "      platform: [el9]", "    requires:",
                 "      platform: [el9]", "  profiles:"]
        for profile, names in profiles.items():
            lines += [f"    {profile}:", "      rpms:", *[f"      - {name}" for name in names]]
        lines += ["  artifacts:", "    rpms:", *[f"    - {nevra}" for nevra in artifacts], "..."]
        docs.append("\n".join(lines))
    defaults = ["---", "document: modulemd-defaults", "version: 1", "data:", f"  module: {MODULE}",
                f"  stream: {rpm_packages.DEFAULT_STREAM}", "  profiles:"]
    defaults += [f"    {stream}: [default]" for stream in rpm_packages.stream_names()]
    docs.append("\n".join(defaults + ["..."]))
    return "\n".join(docs) + "\n"


def run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RpmRepoError(f"{what} failed: {(done.stderr or done.stdout).strip()[-2000:]}")


def build_rpm_repo(dest: Path, kernel_rpms: Path | None = None, el: str = "9") -> Path:
    """Build every package of EL `el`, the repodata and (EL 9) the module metadata into ``dest``
    (replacing it), and the packages of the kernel the ``kernel-upgrade`` fault registers into
    ``kernel_rpms`` (default: ``dest``/../kernel-rpms), outside the repository."""
    dest = Path(dest)
    kernel_rpms = Path(kernel_rpms) if kernel_rpms else dest.parent / "kernel-rpms"
    missing = [f"{tool} (Debian package {package})" for tool, package in TOOLS.items() if shutil.which(tool) is None]
    if missing:
        raise RpmRepoError(f"the lab's EL {el} repository needs " + ", ".join(missing)
                           + ": run scripts/system-deps.sh (or apt-get install rpm createrepo-c)")
    shutil.rmtree(dest, ignore_errors=True)
    packages = rpm_packages.driver_packages(el) + rpm_system.repo_packages(el)
    build_rpms(packages, dest / "Packages")
    build_rpms(rpm_system.upgrade_kernel_packages(el), kernel_rpms)
    run(["createrepo_c", "--quiet", "--no-database", "--simple-md-filenames", str(dest)], "createrepo_c")
    if el not in MODULAR:
        return dest
    with tempfile.TemporaryDirectory(prefix="gpuconf-modules-") as work:
        modules = Path(work) / "modules.yaml"
        modules.write_text(modules_yaml(packages))
        run(["modifyrepo_c", "--mdtype=modules", "--simple-md-filenames", str(modules), str(dest / "repodata")],
            "modifyrepo_c")
    return dest


if __name__ == "__main__":
    import sys

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "rpm-repo").resolve()
    major = sys.argv[2] if len(sys.argv) > 2 else "9"
    build_rpm_repo(target, el=major)
    print(f"built {target}; repo file:\n{repo_file(target, major)}", end="")
