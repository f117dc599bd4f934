"""What differs on an EL node (Rocky Linux 9 or 10): boot files, kernel headers, the kernel command line.

An EL node is the same simulated kernel, systemd and GPU as a Debian node, but its boot follows
EL: ``/boot/initramfs-<kver>.img`` written by ``dracut``, Boot Loader Specification entries in
``/boot/loader/entries/`` kept by ``grubby``, kernel headers (``kernel-devel``) under
``/usr/src/kernels/<kver>``, and the command line of the entry that boots becomes
``/proc/cmdline``. A node is EL when ``/etc/redhat-release`` exists (the EL image layers ship it),
and its major version is the one that file names.
"""
from __future__ import annotations

import os

import catalog
import state

BLS_DIR = "/boot/loader/entries"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
GRUBENV = "/boot/grub2/grubenv"
ROOT = "/dev/mapper/rl-root"
# What a Rocky 9 cloud install leaves in every entry (root= is kept apart, as grubby shows it).
DEFAULT_ARGS = ("ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap "
                "rd.lvm.lv=rl/root rd.lvm.lv=rl/swap console=ttyS0,115200n8")
IMAGE_MACHINE_ID = catalog.EL_IMAGE_MACHINE_ID
# rpms the kernel-upgrade fault registers; the files come from kernels.install_kernel.
KERNEL_RPMS_DIR = "/usr/lib/gpuconf-lab/el/kernel-rpms"


def is_el() -> bool:
    return state.exists("/etc/redhat-release")


def pretty() -> str:
    """What kernel-install puts in entry titles: `9.4 (Blue Onyx)` from the release file's
    `Rocky Linux release 9.4 (Blue Onyx)`."""
    text = (state.read_text("/etc/redhat-release", "") or "").strip()
    return text.partition(" release ")[2] or text


def major() -> str:
    """The node's EL major version ("9", "10"), from its release file."""
    version = pretty().split(" ")[0]
    return version.split(".")[0] if version else "9"


def upgrade_kernel() -> str:
    """The kernel the kernel-upgrade fault installs on this node's EL version."""
    return catalog.EL_KERNELS.get(major(), catalog.EL_KERNELS["9"])[1]


def initrd_path(release: str) -> str:
    return f"/boot/initramfs-{release}.img"


def headers_dir(release: str) -> str:
    return f"/usr/src/kernels/{release}"


def machine_id() -> str:
    text = (state.read_text("/etc/machine-id", "") or "").strip()
    return text or IMAGE_MACHINE_ID


def entry_path(release: str, machine: str | None = None) -> str:
    return f"{BLS_DIR}/{machine or machine_id()}-{release}.conf"


def parse_entry(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and not key.startswith("#"):
            fields[key] = value.strip()
    return fields


def render_entry(fields: dict[str, str]) -> str:
    order = ("title", "version", "linux", "initrd", "options", "grub_users", "grub_arg", "grub_class")
    keys = [k for k in order if k in fields] + [k for k in fields if k not in order]
    return "".join(f"{key} {fields[key]}\n" for key in keys)


def entries() -> list[tuple[str, dict[str, str]]]:
    """(node path, fields) of every BLS entry, newest kernel first (grubby's index order)."""
    import initramfs

    found = []
    try:
        names = os.listdir(state.path(BLS_DIR))
    except OSError:
        return []
    for name in names:
        if name.endswith(".conf"):
            path = f"{BLS_DIR}/{name}"
            found.append((path, parse_entry(state.read_text(path, "") or "")))
    found.sort(key=lambda item: initramfs.version_key(item[1].get("version", "")), reverse=True)
    return found


def new_kernel_options() -> str:
    """The options a newly installed kernel's entry gets: /etc/kernel/cmdline, as kernel-install
    reads it (grubby --update-kernel=ALL keeps that file in step)."""
    text = (state.read_text(KERNEL_CMDLINE, "") or "").strip()
    if text:
        return text
    return f"root={ROOT} {DEFAULT_ARGS}"


def add_entry(release: str, machine: str | None = None) -> None:
    """What kernel-install writes for a new kernel on EL."""
    fields = {"title": f"Rocky Linux ({release}) {pretty()}", "version": release, "linux": f"/vmlinuz-{release}",
              "initrd": f"/initramfs-{release}.img $tuned_initrd", "options": f"{new_kernel_options()} $tuned_params",
              "grub_users": "$grub_users", "grub_arg": "--unrestricted", "grub_class": "rocky"}
    state.write_text(entry_path(release, machine), render_entry(fields))
    if not state.exists(KERNEL_CMDLINE):
        state.write_text(KERNEL_CMDLINE, new_kernel_options() + "\n")


def split_options(options: str) -> tuple[str, list[str]]:
    """(root, other args) of an entry's options, without grubby's $tuned_* variables."""
    root, args = "", []
    for word in options.split():
        if word.startswith("root="):
            root = word[5:]
        elif not word.startswith("$"):
            args.append(word)
    return root, args


def cmdline(release: str) -> str:
    """The /proc/cmdline a boot of ``release`` gets from its BLS entry."""
    for _path, fields in entries():
        if fields.get("version") == release:
            root, args = split_options(fields.get("options", ""))
            return " ".join([f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{release}", f"root={root}", *args]) + "\n"
    return f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{release} root={ROOT} {DEFAULT_ARGS}\n"


def blacklisted_by_cmdline(text: str) -> tuple[set[str], set[str]]:
    """(modules the initramfs stage refuses, modules every stage refuses) from a command line:
    ``rd.driver.blacklist=`` acts in the initramfs only, ``modprobe.blacklist=`` everywhere."""
    early, always = set(), set()
    for word in text.split():
        key, _, value = word.partition("=")
        names = {name.replace("-", "_") for name in value.split(",") if name}
        if key in ("rd.driver.blacklist", "rdblacklist"):
            early |= names
        elif key in ("modprobe.blacklist", "module_blacklist"):
            always |= names
    return early | always, always


def read_grubenv() -> dict[str, str]:
    values = {}
    for line in (state.read_text(GRUBENV, "") or "").splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key] = value
    return values


def write_grubenv(values: dict[str, str]) -> None:
    """grub2-editenv's format: a 1024-byte block padded with '#'."""
    text = "# GRUB Environment Block\n" + "".join(f"{key}={value}\n" for key, value in values.items())
    state.write_text(GRUBENV, text + "#" * max(0, 1024 - len(text)), 0o600)


def entry_id(path: str) -> str:
    return os.path.basename(path)[:-len(".conf")]


def default_index(found: list[tuple[str, dict[str, str]]] | None = None) -> int:
    """The entry grub boots: saved_entry (an id or a title), else the first (newest)."""
    found = entries() if found is None else found
    saved = read_grubenv().get("saved_entry", "")
    for index, (path, fields) in enumerate(found):
        if saved and saved in (entry_id(path), fields.get("title")):
            return index
    if saved.isdigit() and int(saved) < len(found):
        return int(saved)
    return 0


def default_release() -> str | None:
    found = entries()
    if not found:
        return None
    return found[default_index(found)][1].get("version")


def set_default(release: str) -> None:
    for path, fields in entries():
        if fields.get("version") == release:
            values = read_grubenv()
            values["saved_entry"] = entry_id(path)
            write_grubenv(values)
            return


def register_kernel_rpms(release: str) -> list[str]:
    """Record the kernel packages of ``release`` in the rpm database, as the dnf transaction of
    a real upgrade would (the files themselves come from ``kernels.install_kernel``)."""
    import subprocess

    directory = state.path(KERNEL_RPMS_DIR)
    try:
        files = sorted(os.path.join(directory, name) for name in os.listdir(directory)
                       if name.endswith(f"-{release}.rpm"))
    except OSError:
        return []
    if not files or state.TEST_MODE:   # never the machine's rpm database
        return []
    subprocess.run(["rpm", "-i", "--force-debian", "--justdb", "--nodeps", "--noscripts", *files],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return [os.path.basename(path)[:-len(".rpm")] for path in files]
