"""The image layer every node of a lab shares, built once per content hash of the lab's sources.

The layer is what a fresh cloud image adds to (or removes from) the machine's own `/`: the
simulators, the local apt repository of simulated NVIDIA packages, user `gpuadmin` with sudo, apt
sources that point only at that repository (with package lists already fetched), and no trace
of the machine's own sshd host keys. It is built as the upper dir of a temporary overlay on
`/` in a private mount namespace, so files deleted there become real overlay whiteouts.

The cache lives on disk, but each lab mounts a tmpfs copy of it: overlayfs refuses two lower
layers where one (the image, under /var/lib) is inside the other (`/`) on the same filesystem.
"""
from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

from gpuconf_lab.runtime import IMAGES_DIR, REPO_IN_IMAGE, STATE_ROOT, USER, LabError

IMAGE_FORMAT = 1
LAB_DIR = Path(__file__).parent
# Host-side modules: editing them does not change what is inside a node's image.
NOT_IN_IMAGE = {"__init__.py", "__main__.py", "cli.py", "fleet.py", "node.py", "init.py",
                "digest.py", "inventory_file.py", "runtime.py", "linux.py", "slurm_cluster.py",
                "slurm_templates.py"}
APT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "DEBIAN_FRONTEND": "noninteractive", "HOME": "/root", "PYTHONDONTWRITEBYTECODE": "1"}
SUDOERS = f"""# gpuconf lab: the admin user of a simulated node, as on a cloud image
{USER} ALL=(ALL:ALL) NOPASSWD: ALL
# keep Python from writing .pyc files under sudo too: check mode must not change a node
Defaults env_keep += "PYTHONDONTWRITEBYTECODE"
# and from creating ~/.sudo_as_admin_successful on the first sudo
Defaults !admin_flag
"""


def source_hash() -> str:
    """Hash of every lab source that ends up in the image (simulators, repo builder, this file)."""
    digest = hashlib.sha256(f"format {IMAGE_FORMAT}\n".encode())
    for path in sorted(LAB_DIR.rglob("*")):
        relative = path.relative_to(LAB_DIR)
        if (not path.is_file() or "__pycache__" in relative.parts or path.suffix == ".pyc"
                or (len(relative.parts) == 1 and relative.name in NOT_IN_IMAGE)):
            continue
        digest.update(f"{relative}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def ensure_image(log=print) -> Path:
    """The cached image layer for the current sources, building it first when needed."""
    image_hash = source_hash()
    layer = IMAGES_DIR / image_hash / "layer"
    if layer.is_dir():
        return layer
    IMAGES_DIR.mkdir(parents=True, exist_ok=True)
    with open(IMAGES_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if layer.is_dir():
            return layer
        log(f"building the lab image {image_hash} (once per change of the lab sources)...")
        started = time.monotonic()
        build(image_hash)
        log(f"lab image built in {time.monotonic() - started:.1f}s")
    return layer


def build(image_hash: str) -> None:
    for stale in IMAGES_DIR.iterdir():   # under the lock no other build runs: all are stale
        if stale.name != ".lock":
            shutil.rmtree(stale, ignore_errors=True)
    tmp = IMAGES_DIR / f".build-{image_hash}"
    for name in ("layer", "work", "mnt"):
        (tmp / name).mkdir(parents=True)
    hide_machine_state(tmp / "layer")
    log_path = IMAGES_DIR / "build.log"
    # The builder imports gpuconf_lab from where this file is, installed or not.
    project = LAB_DIR.parent
    env = dict(os.environ, PYTHONPATH=str(project), PYTHONDONTWRITEBYTECODE="1")
    with open(log_path, "wb") as log_file:
        result = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "gpuconf_lab.image",
             "build-inside", str(tmp), image_hash],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=str(project))
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = log_path.read_text(errors="replace")[-3000:]
        raise LabError(f"building the lab image failed (exit {result.returncode}); "
                       f"full log in {log_path}:\n{tail}")
    shutil.rmtree(tmp / "work")
    (tmp / "mnt").rmdir()
    tmp.rename(IMAGES_DIR / image_hash)


def machine_state() -> list[Path]:
    """What the machine has that a fresh GPU node's image does not: its own CUDA, its linker and
    profile entries, what it put in /usr/local/bin, and root's home (credentials, and dotfiles
    that run e.g. `pyenv init`, whose rehash touches the shims: a login shell in check mode
    would change the node).

    Kept: the entry of /root that holds the Python gpuconf runs on (a pyenv build, say), since a
    lab node runs the machine's own virtual environment in local mode (image builds, timers)."""
    found = [*Path("/usr/local").glob("cuda"), *Path("/usr/local").glob("cuda-*"),
             *Path("/etc/ld.so.conf.d").glob("*cuda*"), *Path("/etc/profile.d").glob("*cuda*"),
             # empty on a fresh image; here they hold the machine's docker CLI and CUDA tools,
             # which come first on PATH and would shadow what the node's packages install
             *Path("/usr/local/bin").glob("*"), *Path("/usr/local/sbin").glob("*")]
    interpreters = {Path(sys.base_prefix).resolve(), Path(sys.executable).resolve()}
    for entry in Path("/root").iterdir():
        if not any(entry == p or entry in p.parents for p in interpreters):
            found.append(entry)
    return sorted(p for p in found if p.is_symlink() or p.exists())


def hide_machine_state(layer: Path) -> None:
    """Written into the upper dir before it is mounted (the only time that is allowed):
    whiteouts (0:0 character devices) hide machine_state(), and root gets Debian's dotfiles."""
    for path in machine_state():
        target = layer / path.relative_to("/")
        if not target.parent.is_dir():
            target.parent.mkdir(parents=True)
            shutil.copystat(path.parent, target.parent)
        os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(0, 0))
    root = layer / "root"
    if not root.is_dir():
        root.mkdir()
        shutil.copystat("/root", root)
    for name in ("bashrc", "profile"):
        dotfile, target = Path("/usr/share/base-files") / f"dot.{name}", root / f".{name}"
        if dotfile.is_file():
            target.unlink(missing_ok=True)   # its whiteout, if the machine has one
            shutil.copy(dotfile, target)


def run(argv: list[str], **kwargs) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, env=APT_ENV, stdin=subprocess.DEVNULL, **kwargs)


def mount_build_root(mnt: Path) -> None:
    """What a layer's build sees besides its overlay (the Debian image and each EL layer alike):
    empty tmpfs over the lab's own state and the temporary directories, a /proc, and a /dev
    holding only the harmless character devices."""
    for target in (STATE_ROOT, IMAGES_DIR, Path("/tmp"), Path("/run"), Path("/var/tmp")):
        if (mnt / target.relative_to("/")).is_dir():
            run(["mount", "-t", "tmpfs", "-o", "mode=1777" if "tmp" in target.name else "mode=755",
                 "tmpfs", str(mnt / target.relative_to("/"))])
    run(["mount", "-t", "proc", "proc", str(mnt / "proc")])
    run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", str(mnt / "dev")])
    for device in ("null", "zero", "full", "random", "urandom"):
        (mnt / "dev" / device).touch()
        run(["mount", "--bind", f"/dev/{device}", str(mnt / "dev" / device)])


def build_inside(tmp: Path, image_hash: str) -> None:
    """Runs in a private mount namespace: everything mounted here vanishes when it exits."""
    layer, work, mnt = tmp / "layer", tmp / "work", tmp / "mnt"
    run(["mount", "-t", "overlay", "gpuconf-lab-image", "-o",
         f"lowerdir=/,upperdir={layer},workdir={work}", str(mnt)])
    mount_build_root(mnt)

    install_repo(mnt)
    install_simulators(mnt)
    add_admin_user(mnt)
    configure_apt(mnt)
    remove_machine_identity(mnt)
    run(["chroot", str(mnt), "ldconfig"])   # the linker cache without the hidden CUDA
    for name in ("runtime", "fabric", "shared"):   # mount points PID 1 needs (see init.py)
        (mnt / "usr/lib/gpuconf-lab" / name).mkdir(parents=True, exist_ok=True)
    (mnt / "etc/gpuconf-lab").mkdir(parents=True, exist_ok=True)
    (mnt / "etc/gpuconf-lab/image.json").write_text(json.dumps({"image": image_hash}) + "\n")


def install_repo(mnt: Path) -> None:
    dest = mnt / REPO_IN_IMAGE.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        from gpuconf_lab.repo import build_repo
    except ModuleNotFoundError as exc:
        if exc.name != "gpuconf_lab.repo":
            raise
        print("gpuconf_lab.repo is not there yet: the image gets an empty apt repository", flush=True)
        dest.mkdir(exist_ok=True)
        with gzip.open(dest / "Packages.gz", "wb"):
            pass   # an empty index: apt rejects an empty uncompressed Packages file
        return
    build_repo(dest)
    subprocess.run(["chmod", "-R", "a+rX", str(dest)], check=True)   # apt's _apt user reads it


def install_simulators(mnt: Path) -> None:
    try:
        from gpuconf_lab.sim.install import install_image
    except ModuleNotFoundError as exc:
        if exc.name not in ("gpuconf_lab.sim", "gpuconf_lab.sim.install"):
            raise
        print("gpuconf_lab.sim.install is not there yet: the image has no simulators", flush=True)
        return
    install_image(mnt)


def add_admin_user(mnt: Path) -> None:
    passwd = (mnt / "etc/passwd").read_text()
    if not any(line.split(":", 1)[0] == USER for line in passwd.splitlines()):
        # '*' rather than a locked '!' password: sshd without PAM refuses locked accounts.
        run(["chroot", str(mnt), "useradd", "--create-home", "--shell", "/bin/bash",
             "--groups", "sudo", "--password", "*", USER])
    sudoers = mnt / "etc/sudoers.d/gpuconf-lab"
    sudoers.write_text(SUDOERS)
    sudoers.chmod(0o440)
    run(["chroot", str(mnt), "visudo", "-cf", "/etc/sudoers.d/gpuconf-lab"])


def repo_source_line(repo: Path) -> str:
    """A flat repository (Packages at the top) or one with dists/<suite>/Release."""
    dists = repo / "dists"
    if dists.is_dir():
        lines = []
        for release in sorted(dists.glob("*/Release")):
            fields = dict(line.split(":", 1) for line in release.read_text().splitlines()
                          if ":" in line and not line.startswith(" "))
            components = fields.get("Components", "main").strip()
            lines.append(f"deb [trusted=yes] file:{REPO_IN_IMAGE} {release.parent.name} {components}")
        if lines:
            return "\n".join(lines) + "\n"
    return f"deb [trusted=yes] file:{REPO_IN_IMAGE} ./\n"


def configure_apt(mnt: Path) -> None:
    """Only the lab repository, so that no node ever reaches for the network."""
    apt = mnt / "etc/apt"
    (apt / "sources.list").unlink(missing_ok=True)
    for directory in ("sources.list.d", "preferences.d"):
        for entry in (apt / directory).iterdir():
            entry.unlink()
    (apt / "sources.list.d/gpuconf-lab.list").write_text(repo_source_line(mnt / REPO_IN_IMAGE.lstrip("/")))
    run(["chroot", str(mnt), "apt-get", "-q", "update"])
    if not list((mnt / "var/lib/apt/lists").glob("*gpuconf-lab-repo*Packages*")):
        raise LabError("apt-get update in the image did not fetch the lab repository's package list")


def remove_machine_identity(mnt: Path) -> None:
    """A node must not carry the machine's sshd host keys or root's SSH keys."""
    for key in (mnt / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    shutil.rmtree(mnt / "root/.ssh", ignore_errors=True)


def mount_lab_copy(layer: Path, target: Path) -> None:
    """Copy the cached layer into a tmpfs of its own at `target` (see the module docstring)."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "gpuconf-lab-image", str(target)], check=True)
    try:
        subprocess.run(["cp", "-a", f"{layer}/.", str(target)], check=True)
    except subprocess.CalledProcessError:
        unmount_lab_copy(target)
        raise LabError(f"could not copy the lab image {layer} into {target}") from None


def unmount_lab_copy(target: Path) -> None:
    if is_mount_point(target):
        if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(target)], check=True)


def is_mount_point(path: Path) -> bool:
    target = str(path)
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "build-inside":
        build_inside(Path(sys.argv[2]), sys.argv[3])
    else:
        print("usage: python -m gpuconf_lab.image build-inside TMPDIR HASH", file=sys.stderr)
        sys.exit(2)
