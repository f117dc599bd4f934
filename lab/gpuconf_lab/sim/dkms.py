"""``dkms``: the DKMS framework (v3.0.10, as in Debian 12) building modules for a kernel.

State is the real DKMS tree: ``/var/lib/dkms/<module>/<version>/source`` links to
``/usr/src/<module>-<version>`` (shipped by ``nvidia-dkms-*``), a build leaves the modules in
``/var/lib/dkms/<module>/<version>/<kernel>/x86_64/module/``, and ``install`` copies them to
``/lib/modules/<kernel>/updates/dkms/``, which is where the simulated modprobe finds
``nvidia``. A kernel without a build therefore has no ``nvidia`` module, as after a kernel
upgrade whose DKMS hook did not run. ``status`` prints the v3 format
(``nvidia/535.104.05, 6.1.0-18-amd64, x86_64: installed``).

A source tree with a ``kernel-open/`` directory (``nvidia-dkms-<br>-open``) builds the open
modules (``license=Dual MIT/GPL``), any other the proprietary ones. Builds are not signed: the
simulated kernel headers have no ``scripts/sign-file``, so under Secure Boot they do not load.
"""
from __future__ import annotations

import os
import re
import shutil
import sys

import catalog
import el
import entry
import initramfs
import kmod
import state

TREE = "/var/lib/dkms"
ARCH = "x86_64"


def fail(message: str, code: int = 1) -> int:
    sys.stderr.write(f"Error! {message}\n")
    return code


def read_conf(module: str, version: str) -> dict:
    """PACKAGE_NAME, BUILT_MODULE_NAME[] ... of ``/usr/src/<module>-<version>/dkms.conf``."""
    text = state.read_text(f"/usr/src/{module}-{version}/dkms.conf", "") or ""
    conf: dict = {"modules": {}}
    for line in text.splitlines():
        match = re.match(r'\s*([A-Z_]+)(?:\[(\d+)\])?\s*=\s*"?([^"]*)"?', line)
        if not match:
            continue
        key, index, value = match.groups()
        if index is not None:
            conf["modules"].setdefault(int(index), {})[key] = value
        else:
            conf[key] = value
    return conf


def added() -> list[tuple[str, str]]:
    """(module, version) pairs in the DKMS tree."""
    pairs = []
    try:
        names = sorted(os.listdir(state.path(TREE)))
    except OSError:
        return pairs
    for module in names:
        try:
            versions = os.listdir(state.path(f"{TREE}/{module}"))
        except OSError:
            continue
        for version in sorted(versions, key=initramfs.version_key):
            if state.exists(f"{TREE}/{module}/{version}/source"):
                pairs.append((module, version))
    return pairs


def built_kernels(module: str, version: str) -> list[str]:
    base = f"{TREE}/{module}/{version}"
    try:
        entries = os.listdir(state.path(base))
    except OSError:
        return []
    return sorted((e for e in entries if os.path.isdir(state.path(f"{base}/{e}/{ARCH}/module"))),
                  key=initramfs.version_key)


def installed_version(module: str, kernel: str) -> str | None:
    link = state.path(f"{TREE}/{module}/kernel-{kernel}-{ARCH}")
    if os.path.islink(link):
        return os.readlink(link).split("/")[0]
    return None


def status(module=None, version=None, kernel=None) -> list[str]:
    lines = []
    for mod, ver in added():
        if module and mod != module or version and ver != version:
            continue
        kernels = [k for k in built_kernels(mod, ver) if not kernel or k == kernel]
        if not kernels and not kernel:
            lines.append(f"{mod}/{ver}: added")
        for k in kernels:
            state_ = "installed" if installed_version(mod, k) == ver else "built"
            lines.append(f"{mod}/{ver}, {k}, {ARCH}: {state_}")
    return lines


def add(module: str, version: str) -> int:
    source = f"/usr/src/{module}-{version}"
    if not state.exists(f"{source}/dkms.conf"):
        return fail(f"Could not find module source directory.\nDirectory: {source} does not exist.", 2)
    link = f"{TREE}/{module}/{version}/source"
    if state.exists(link):
        return fail(f"DKMS tree already contains: {module}-{version}\nYou cannot add the same module/version "
                    "combo more than once.", 3)
    os.makedirs(state.path(os.path.dirname(link)), exist_ok=True)
    os.symlink(source, state.path(link))
    print(f"Creating symlink {link} -> {source}")
    return 0


def build(module: str, version: str, kernel: str) -> int:
    if not state.exists(f"{TREE}/{module}/{version}/source"):
        return fail(f"The module/version combo: {module}-{version} is not located in the DKMS tree.", 3)
    if not state.exists(f"/lib/modules/{kernel}/build"):
        return fail(f"Your kernel headers for kernel {kernel} cannot be found at /lib/modules/{kernel}/build "
                    f"or /lib/modules/{kernel}/source.\nPlease install the {headers_package(kernel)} package or use "
                    "the --kernelsourcedir option to tell DKMS where it's located.", 1)
    target = f"{TREE}/{module}/{version}/{kernel}/{ARCH}/module"
    if state.exists(target):
        print(f"Module {module}/{version} already built for kernel {kernel} ({ARCH}), skip. You may override by specifying --force.")
        return 0
    conf = read_conf(module, version)
    print(f"\nBuilding module:\nCleaning build area...\n'make' -j{os.cpu_count() or 2} NV_EXCLUDE_BUILD_MODULES='' "
          f"KERNEL_UNAME={kernel} IGNORE_CC_MISMATCH='' modules.......")
    open_modules = state.exists(f"/usr/src/{module}-{version}/kernel-open")
    for index in sorted(conf["modules"]):
        name = conf["modules"][index].get("BUILT_MODULE_NAME", module)
        filename, text = _module_file(name, version, kernel, open_modules)
        state.write_text(f"{target}/{filename}", text)
    print("Cleaning build area...")
    return 0


def headers_package(kernel: str) -> str:
    return f"kernel-devel-{kernel}" if el.is_el() else f"linux-headers-{kernel}"


def _module_file(name: str, version: str, kernel: str, open_modules: bool = False) -> tuple[str, str]:
    key = name.replace("-", "_")
    if key in catalog.NVIDIA_DKMS:
        return catalog.nvidia_ko(key, version, kernel, open_modules=open_modules)
    return f"{name}.ko", catalog.render_ko({"name": key, "version": version, "vermagic": catalog.vermagic(kernel),
                                            "depends": "", "size": 65536, "license": "GPL", "intree": ""})


def install(module: str, version: str, kernel: str) -> int:
    if installed_version(module, kernel) == version:
        print(f"Module {module}/{version} already installed on kernel {kernel} ({ARCH}), skip. "
              "You may override by specifying --force.")
        return 0
    code = build(module, version, kernel)
    if code:
        return code
    previous = installed_version(module, kernel)
    if previous:
        _uninstall(module, previous, kernel, quiet=True)
    conf = read_conf(module, version)
    source = f"{TREE}/{module}/{version}/{kernel}/{ARCH}/module"
    for index in sorted(conf["modules"]):
        spec = conf["modules"][index]
        filename, _ = _module_file(spec.get("BUILT_MODULE_NAME", module), version, kernel)
        location = spec.get("DEST_MODULE_LOCATION", "/updates/dkms").rstrip("/")
        location = "/updates/dkms" if location.startswith("/kernel") else location
        print(f"\n{filename}:\nRunning module version sanity check.\n - Original module\n"
              f"   - No original module exists within this kernel\n - Installation\n"
              f"   - Installing to /lib/modules/{kernel}{location}/")
        state.write_text(f"/lib/modules/{kernel}{location}/{filename}", state.read_text(f"{source}/{filename}", ""))
    link = state.path(f"{TREE}/{module}/kernel-{kernel}-{ARCH}")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(f"{version}/{kernel}/{ARCH}", link)
    print("depmod...")
    kmod.write_modules_dep(kernel)
    return 0


def _uninstall(module: str, version: str, kernel: str, quiet: bool = False) -> None:
    conf = read_conf(module, version)
    for index in sorted(conf["modules"]):
        spec = conf["modules"][index]
        filename, _ = _module_file(spec.get("BUILT_MODULE_NAME", module), version, kernel)
        location = spec.get("DEST_MODULE_LOCATION", "/updates/dkms").rstrip("/")
        location = "/updates/dkms" if location.startswith("/kernel") else location
        state.remove(f"/lib/modules/{kernel}{location}/{filename}")
        if not quiet:
            print(f"{filename}:\n - Uninstallation\n   - Deleting from: /lib/modules/{kernel}{location}/")
    link = f"{TREE}/{module}/kernel-{kernel}-{ARCH}"
    if installed_version(module, kernel) == version:
        state.remove(link)
    if state.exists(f"/lib/modules/{kernel}"):
        kmod.write_modules_dep(kernel)


def remove(module: str, version: str, kernels: list[str]) -> int:
    if not state.exists(f"{TREE}/{module}/{version}"):
        return fail(f"The module/version combo: {module}-{version} is not located in the DKMS tree.", 3)
    for kernel in kernels:
        print(f"Module {module}-{version} for kernel {kernel} ({ARCH}).")
        if installed_version(module, kernel) == version:
            print("Before uninstall, this module version was ACTIVE on this kernel.\n")
            _uninstall(module, version, kernel)
            print("depmod...")
        shutil.rmtree(state.path(f"{TREE}/{module}/{version}/{kernel}"), ignore_errors=True)
    if not built_kernels(module, version):
        shutil.rmtree(state.path(f"{TREE}/{module}/{version}"), ignore_errors=True)
        print(f"Deleting module {module}-{version} completely from the DKMS tree.")
    return 0


def autoinstall(kernel: str) -> int:
    newest: dict[str, str] = {}
    for module, version in added():
        if read_conf(module, version).get("AUTOINSTALL", "").lower() == "yes":
            newest[module] = version
    code = 0
    for module, version in sorted(newest.items()):
        if installed_version(module, kernel) != version:
            code = max(code, install(module, version, kernel))
    return code


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("Usage: /usr/sbin/dkms [action] [options]\n  [action]  = { add | remove | build | install | uninstall |"
              " match | autoinstall | mkdeb | status }")
        return 0 if argv else 1
    if argv[0] in ("--version", "-V"):
        print("dkms-3.0.10")
        return 0
    action, rest = argv[0], argv[1:]
    module = version = None
    kernels: list[str] = []
    everything = False
    positional = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in ("-m", "-v", "-k") and i + 1 < len(rest):
            i += 1
            if arg == "-m":
                module, _, inline = rest[i].partition("/")
                version = inline or version
            elif arg == "-v":
                version = rest[i]
            else:
                kernels.append(rest[i].split("/")[0])
        elif arg == "--all":
            everything = True
        elif not arg.startswith("-"):
            positional.append(arg)
        i += 1
    for item in positional:
        if item.startswith("/usr/src/"):
            module, _, version = os.path.basename(item.rstrip("/")).rpartition("-")
        elif "/" in item:
            module, version = item.split("/", 1)
    kernel = kernels[0] if kernels else state.running_kernel()
    if action == "status":
        lines = status(module, version, kernels[0] if kernels else None)
        if lines:
            print("\n".join(lines))
        return 0
    if action != "autoinstall" and not (module and version):
        return fail("Invalid number of arguments passed.\nUsage: add <module>/<module-version> or\n       "
                    "add -m <module>/<module-version> or\n       add -m <module> -v <module-version>", 1)
    if not state.is_root() and action in ("add", "build", "install", "remove", "uninstall", "autoinstall"):
        return fail("You must be root to use this command.", 1)
    if action == "add":
        return add(module, version)
    if action == "build":
        return build(module, version, kernel)
    if action == "install":
        return install(module, version, kernel)
    if action == "uninstall":
        _uninstall(module, version, kernel)
        return 0
    if action == "remove":
        targets = built_kernels(module, version) if everything or not kernels else kernels
        return remove(module, version, targets)
    if action == "autoinstall":
        return autoinstall(kernel)
    return fail(f"Unknown action specified: \"{action}\"", 1)


if __name__ == "__main__":
    entry.run(main)
