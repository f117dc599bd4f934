"""``dracut`` and ``lsinitrd`` of an EL 9 node: ``/boot/initramfs-<kver>.img``.

The image is the same snapshot the Debian simulator's ``update-initramfs`` writes (a gzip'ed
newc cpio carrying ``/etc/modprobe.d`` and ``/usr/lib/modprobe.d``, see ``initramfs``), at
EL's path. dracut's ``omit_drivers`` (from ``/usr/lib/dracut/dracut.conf.d``,
``/etc/dracut.conf.d`` and ``--omit-drivers``) leaves those modules out of the image, and a
module that is not in the initramfs cannot load in the early boot.

``dracut [-f] [-v] [--kver K] [--regenerate-all] [IMAGE [K]]`` is silent on success, as on
EL 9; without ``-f`` it refuses to replace an existing image.
"""
from __future__ import annotations

import gzip
import os
import sys
import time

import el
import entry
import initramfs
import state

CONF_DIRS = ("/usr/lib/dracut/dracut.conf.d", "/etc/dracut.conf.d")
VERSION = "057-53.git20240104.el9"
USAGE = """Usage: /usr/bin/dracut [OPTION]... [<initramfs> [<kernel-version>]]

Version: dracut-057-53.git20240104.el9

Creates initial ramdisk images for preloading modules

  -h, --help  Display all options
  --kver [VERSION]      Set kernel version to [VERSION].
  -f, --force           Overwrite existing initramfs file.
  --regenerate-all      Regenerate all initramfs images at the default location
                         for the kernel versions found on the system.
  --omit-drivers [LIST] Specify a space-separated list of kernel
                         modules to exclude from the initramfs.
  -v, --verbose         Increase verbosity level.
  -q, --quiet           Decrease verbosity level.
"""


def omitted_drivers(extra: list[str]) -> frozenset:
    """omit_drivers+=" ... " from dracut's configuration, then the command line's."""
    names: set[str] = set()
    files: dict[str, str] = {}
    for directory in CONF_DIRS:
        try:
            listing = sorted(os.listdir(state.path(directory)))
        except OSError:
            continue
        for name in listing:
            if name.endswith(".conf"):
                files[name] = f"{directory}/{name}"   # /etc overrides a same-named /usr/lib file
    for name in sorted(files):
        for line in (state.read_text(files[name], "") or "").splitlines():
            line = line.split("#", 1)[0].strip()
            key, _, value = line.partition("=")
            if key.strip().rstrip("+") == "omit_drivers":
                names |= set(value.strip().strip("\"'").split())
    for item in extra:
        names |= set(item.split())
    return frozenset(name.replace("-", "_") for name in names)


def dracut(argv: list[str]) -> int:
    force = verbose = regenerate = False
    kver = None
    omit: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        key, eq, value = arg.partition("=")
        if arg in ("-f", "--force"):
            force = True
        elif arg in ("-v", "--verbose"):
            verbose = True
        elif arg in ("-q", "--quiet", "-H", "--hostonly", "-N", "--no-hostonly", "--no-kernel"):
            pass
        elif arg == "--regenerate-all":
            regenerate = True
        elif key in ("--kver", "--omit-drivers", "--add-drivers", "--force-drivers", "-a", "--add", "-o", "--omit"):
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            if key == "--kver":
                kver = value
            elif key == "--omit-drivers":
                omit.append(value)
        elif arg in ("-h", "--help"):
            print(USAGE, end="")
            return 0
        elif arg == "--version":
            print(f"dracut {VERSION}")
            return 0
        elif arg.startswith("-"):
            sys.stderr.write(f"dracut: Invalid option '{arg}'\n")
            return 1
        else:
            positional.append(arg)
        i += 1
    if not state.is_root():
        sys.stderr.write("dracut: Can't write to /boot: Directory /boot does not exist or is not accessible.\n")
        return 1
    if regenerate:
        releases = _installed()
    else:
        release = kver or (positional[1] if len(positional) > 1 else state.running_kernel())
        releases = [release]
    drivers = omitted_drivers(omit)
    for release in releases:
        image = positional[0] if positional and not regenerate else el.initrd_path(release)
        if not os.path.isdir(state.path(f"/lib/modules/{release}")):
            sys.stderr.write(f"dracut: Cannot find module directory /lib/modules/{release}/\n"
                             "dracut: and --no-kernel was not specified\n")
            return 1
        if state.exists(image) and not force:
            sys.stderr.write(f"dracut: Will not override existing initramfs ({image}) without --force\n")
            return 1
        if verbose:
            print(f"dracut: Executing: /usr/bin/dracut {' '.join(argv)}")
            if drivers:
                print(f"dracut: *** Omitting drivers: {' '.join(sorted(drivers))} ***")
            print("dracut: *** Including modules done ***\ndracut: *** Installing kernel module dependencies ***")
            print(f"dracut: *** Creating image file '{image}' ***")
        blob = initramfs.build(release, drivers)
        real = state.path(image)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real + ".tmp", "wb") as handle:
            handle.write(blob)
        os.chmod(real + ".tmp", 0o600)
        os.replace(real + ".tmp", real)
        if verbose:
            print(f"dracut: *** Creating initramfs image file '{image}' done ***")
    return 0


def _installed() -> list[str]:
    try:
        return sorted(os.listdir(state.path("/lib/modules")), key=initramfs.version_key)
    except OSError:
        return []


def lsinitrd(argv: list[str]) -> int:
    """``lsinitrd [IMAGE | --kver K]`` lists the image; ``-f FILE`` prints one file of it."""
    wanted, kver, image = None, None, None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-f", "--file", "--kver") and i + 1 < len(argv):
            i += 1
            if arg == "--kver":
                kver = argv[i]
            else:
                wanted = argv[i].lstrip("/")
        elif arg.startswith("-"):
            pass
        elif image is None:
            image = arg
        else:
            kver = arg
        i += 1
    image = image or el.initrd_path(kver or state.running_kernel())
    try:
        with open(state.path(image) if image.startswith("/") else image, "rb") as handle:
            raw = handle.read()
        members = initramfs.read_cpio(gzip.decompress(raw))
    except (OSError, EOFError, ValueError):
        sys.stderr.write(f"No <initramfs file> specified and the default image '{image}' cannot be accessed!\n")
        return 1
    if wanted is not None:
        for name, _mode, data in members:
            if name == wanted:
                sys.stdout.write(data.decode(errors="replace"))
                return 0
        return 1
    stamp = time.strftime("%b %d %H:%M", time.localtime(os.stat(state.path(image) if image.startswith("/")
                                                                else image).st_mtime))
    print(f"Image: {image}: {len(raw) // 1024}K")
    print("=" * 72)
    print(f"Version: dracut-{VERSION}\n\nArguments: -f\n\ndracut modules:\nbash\nsystemd\nkernel-modules\n"
          "kernel-modules-extra\nrootfs-block\nudev-rules\nbase\nfs-lib\nshutdown")
    print("=" * 72)
    for name, mode, data in members:
        kind = "d" if mode & 0o40000 else "-"
        perms = "rwxr-xr-x" if mode & 0o111 else "rw-r--r--"
        print(f"{kind}{perms}   1 root     root     {len(data):>8} {stamp} {name}")
    print("=" * 72)
    return 0


def main(argv: list[str]) -> int:
    tool, args = (argv[0], argv[1:]) if argv else ("dracut", [])
    return lsinitrd(args) if tool == "lsinitrd" else dracut(args)


if __name__ == "__main__":
    entry.run(main)
