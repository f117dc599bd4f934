"""Installed kernels: the module tree, headers and /boot files a Debian kernel package leaves.

The image gets the default kernel at build time; the ``kernel-upgrade`` fault installs another
one the same way (what ``apt-get install linux-image-...`` would do, with its initramfs hook),
but deliberately without running DKMS for it: that is the drift a real upgrade causes when the
DKMS hook fails. Precompiled ``linux-modules-nvidia-*`` modules installed for that release
before it are found by its depmod, as on a real host. The next boot runs the newest kernel recorded in ``kernel.json``.
"""
from __future__ import annotations

import os
import sys

import catalog
import el
import entry
import initramfs
import kmod
import state

KERNEL_JSON = f"{state.VAR}/kernel.json"


def install_kernel(release: str, build_initrd: bool = True) -> None:
    """Write the in-tree module tree, headers and /boot files of ``release``."""
    base = f"/lib/modules/{release}"
    for name in catalog.IN_TREE:
        relpath, text = catalog.in_tree_ko(name, release)
        state.write_text(f"{base}/{relpath}", text)
    kmod.write_modules_dep(release)   # the package's depmod also finds modules shipped before it
    state.write_text(f"{base}/modules.builtin", "kernel/drivers/pci/pcie/portdrv.ko\n")
    headers = el.headers_dir(release) if el.is_el() else f"/usr/src/linux-headers-{release}"
    state.write_text(f"{headers}/Makefile", f"# simulated kernel headers for {release}\nKERNELRELEASE = {release}\n")
    state.write_text(f"{headers}/.config", "CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n")
    link = state.path(f"{base}/build")
    if not os.path.lexists(link):
        os.symlink(headers, link)
    version, _date = catalog.kernel_build(release)
    state.write_text(f"/boot/vmlinuz-{release}", f"simulated Linux kernel image {release} ({version})\n")
    if el.is_el():   # kernel-core ships a copy next to its modules, kernel-install copies it to /boot
        state.write_text(f"{base}/vmlinuz", f"simulated Linux kernel image {release} ({version})\n")
    state.write_text(f"/boot/config-{release}", "CONFIG_MODULES=y\nCONFIG_DRM_NOUVEAU=m\nCONFIG_MLX5_CORE=m\n")
    state.write_text(f"/boot/System.map-{release}", "ffffffff81000000 T _text\n")
    if build_initrd:
        initramfs.write(release)
    info = state.read_json(KERNEL_JSON, {}) or {}
    installed = sorted(set(info.get("installed", [])) | {release}, key=initramfs.version_key)
    info["installed"] = installed
    info["next"] = installed[-1]
    state.write_json(KERNEL_JSON, info)
    if el.is_el():   # kernel-install: a BLS entry, made the default (UPDATEDEFAULT=yes)
        el.add_entry(release)
        el.set_default(release)


def next_kernel() -> str:
    """The release the next boot runs: the newest installed, as GRUB's default entry would
    (on EL, the default BLS entry: grubenv's saved_entry, else the newest)."""
    if el.is_el():
        chosen = el.default_release()
        if chosen and state.exists(f"/lib/modules/{chosen}"):
            return chosen
    info = state.read_json(KERNEL_JSON, {}) or {}
    return info.get("next") or state.DEFAULT_KERNEL


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "install":
        install_kernel(argv[1])
        return 0
    sys.stderr.write("usage: kernels.py install RELEASE\n")
    return 2


if __name__ == "__main__":
    entry.run(main)
