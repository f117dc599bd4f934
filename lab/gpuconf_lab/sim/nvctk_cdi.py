"""``nvidia-ctk cdi generate`` and ``nvidia-ctk cdi list`` of the container toolkit.

``generate`` writes the spec the real tool writes (the block YAML of
tests/fixtures/real/nvidia-ctk/cdi-spec-575.64.03-toolkit-1.17.8-salilkadam.yaml: keys sorted,
``containerEdits`` with the control device nodes, the ``enable-cuda-compat`` and
``update-ldcache`` hooks and a read-only bind mount of each library of the driver found on disk
by its full version, then one device per GPU index, per GPU UUID and ``all``), logging to
stderr in logrus' ``INFO[0000]`` form. It needs NVML: the driver loaded, and libnvidia-ml of
that same version (``Using .../libnvidia-ml.so.<version>`` is its first line, as in the real
log). ``list`` reads every spec in /etc/cdi and /var/run/cdi and prints ``INFO[0000] Found N
CDI devices`` (stderr) and the qualified names, sorted (stdout), as the real one does.
Stdlib only (the shims run python3 -S): the spec is written and read as the block YAML above.
"""
from __future__ import annotations

import json
import os
import re
import sys

import gpu
import state

SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
KIND = "nvidia.com/gpu"
MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "bind")
CONTROL_NODES = ("/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl")
BINARIES = ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-persistenced", "/usr/bin/nvidia-debugdump")


def info(message: str) -> None:
    sys.stderr.write(f"INFO[0000] {message}\n")


def error(message: str) -> int:
    sys.stderr.write(f"ERRO[0000] {message}\n")
    return 1


def library_dir() -> str:
    return "/usr/lib64" if state.exists("/etc/redhat-release") else "/usr/lib/x86_64-linux-gnu"


def firmware_dir(version: str) -> str:
    base = "/usr/lib/firmware" if state.exists("/etc/redhat-release") else "/lib/firmware"
    return f"{base}/nvidia/{version}"


def cdi_version(toolkit: str) -> str:
    """0.5.0 up to 1.18 (the capture's 1.17.8); 0.7.0 by default from 1.19 (reference section 7)."""
    major_minor = tuple(int(part) for part in re.findall(r"\d+", toolkit)[:2])
    return "0.7.0" if major_minor >= (1, 19) else "0.5.0"


def nvml_version() -> str | None:
    """The version of the libnvidia-ml.so.1 on disk (the file its soname link names), or None."""
    link = state.path(f"{library_dir()}/libnvidia-ml.so.1")
    if not os.path.islink(link):
        return None
    match = re.search(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$", os.readlink(link))
    return match[1] if match else None


def driver_files(version: str) -> list[str]:
    """The driver's files the spec mounts: its libraries named by the version, firmware, binaries."""
    found = []
    for directory, pattern in ((library_dir(), rf"^lib.*\.so\.{re.escape(version)}$"), (firmware_dir(version), ".")):
        real = state.path(directory)
        if os.path.isdir(real):
            found += [f"{directory}/{name}" for name in sorted(os.listdir(real)) if re.search(pattern, name)]
    return found + [path for path in BINARIES if state.exists(path)]


def hook(args: list[str], indent: str) -> list[str]:
    lines = [f"{indent}- args:"] + [f"{indent}  - {arg}" for arg in args]
    return lines + [f"{indent}  env:", f"{indent}  - NVIDIA_CTK_DEBUG=false", f"{indent}  hookName: createContainer",
                    f"{indent}  path: /usr/bin/nvidia-cdi-hook"]


def spec_text(toolkit: str, version: str, gpus: list, files: list[str]) -> str:
    lines = ["---", f"cdiVersion: {cdi_version(toolkit)}", "containerEdits:", "  deviceNodes:"]
    lines += [f"  - path: {node}" for node in CONTROL_NODES]
    lines += ["  env:", "  - NVIDIA_VISIBLE_DEVICES=void", "  hooks:"]
    lines += hook(["nvidia-cdi-hook", "enable-cuda-compat", f"--host-driver-version={version}"], "  ")
    lines += hook(["nvidia-cdi-hook", "update-ldcache", "--folder", library_dir()], "  ")
    lines.append("  mounts:")
    for path in files:
        lines += [f"  - containerPath: {path}", f"    hostPath: {path}", "    options:"]
        lines += [f"    - {option}" for option in MOUNT_OPTIONS + (("noexec",) if path.endswith("/socket") else ())]
    lines.append("devices:")
    devices = [(str(g.index), [g]) for g in gpus] + [(g.uuid, [g]) for g in gpus] + [("all", gpus)]
    for name, members in devices:
        lines += ["- containerEdits:", "    deviceNodes:"] + [f"    - path: /dev/nvidia{g.index}" for g in members]
        lines.append(f'  name: "{name}"' if name.isdigit() else f"  name: {name}")
    return "\n".join(lines + [f"kind: {KIND}"]) + "\n"


def generate(toolkit: str, args: list[str]) -> int:
    # --output's environment variable: what nvidia-cdi-refresh.service sets (/var/run/cdi/nvidia.yaml)
    output = os.environ.get("NVIDIA_CTK_CDI_OUTPUT_FILE_PATH") or None
    for i, arg in enumerate(args):
        key, _, value = arg.partition("=")
        if key == "--output":
            output = value or (args[i + 1] if i + 1 < len(args) else "")
    library = nvml_version()
    if library is None:
        return error("failed to generate CDI spec: failed to create device CDI specs: failed to initialize NVML: "
                     "ERROR_LIBRARY_NOT_FOUND")
    info(f"Using {library_dir()}/libnvidia-ml.so.{library}")
    info("Auto-detected mode as 'nvml'")
    loaded = gpu.driver_version()
    if loaded is None:
        return error("failed to generate CDI spec: failed to create device CDI specs: failed to initialize NVML: "
                     "ERROR_DRIVER_NOT_LOADED")
    if loaded != library:
        return error("failed to generate CDI spec: failed to create device CDI specs: failed to initialize NVML: "
                     "ERROR_LIB_RM_VERSION_MISMATCH")
    gpus = gpu.gpus()
    for g in gpus:
        info(f"Selecting /dev/nvidia{g.index} as /dev/nvidia{g.index}")
    info(f"Using driver version {loaded}")
    files = driver_files(loaded)
    for path in files:
        info(f"Selecting {path} as {path}")
    text = spec_text(toolkit, loaded, gpus, files)
    if not output:
        sys.stdout.write(text)
    else:
        state.write_text(output, text, 0o644)
    info(f"Generated CDI spec with version {cdi_version(toolkit)}")
    return 0


def spec_devices(text: str, name: str) -> list[str]:
    """Qualified device names of one spec (JSON, or the block YAML nvidia-ctk writes)."""
    if name.endswith(".json"):
        document = json.loads(text)
        return [f"{document['kind']}={device['name']}" for device in document["devices"]]
    kind = re.search(r"^kind:\s*(\S+)\s*$", text, re.M)
    devices = re.search(r"^devices:\s*\n((?:[ -].*\n?)*)", text, re.M)
    if not kind or not devices:
        raise ValueError("no kind or no devices")
    names = re.findall(r'^  name:\s*"?([^"\n]+?)"?\s*$', devices[1], re.M)
    return [f"{kind[1]}={device}" for device in names]


def list_devices() -> int:
    found = []
    for directory in SPEC_DIRS:
        real = state.path(directory)
        for name in sorted(os.listdir(real)) if os.path.isdir(real) else ():
            if not name.endswith((".yaml", ".json")):
                continue
            try:
                found += spec_devices(state.read_text(f"{directory}/{name}") or "", name)
            except (ValueError, KeyError, TypeError) as exc:
                sys.stderr.write(f"WARN[0000] Ignoring CDI spec {directory}/{name}: {exc}\n")
    info(f"Found {len(found)} CDI devices")
    for device in sorted(found):
        print(device)
    return 0
