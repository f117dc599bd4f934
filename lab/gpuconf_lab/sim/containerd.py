"""containerd (Debian 12's 1.6.20) and ``nvidia-ctk runtime configure --runtime=containerd``.

``configure`` does what toolkit 1.18 and later do: the nvidia runtime goes to the drop-in
``/etc/containerd/conf.d/99-nvidia.toml`` (with ``--cdi.enabled``, the CRI plugin's
``enable_cdi = true`` too), written in go-toml's indented form, and ``/etc/containerd/config.toml``
gets ``imports = ["/etc/containerd/conf.d/*.toml"]`` added, every other line kept; a missing
config.toml is created as ``version = 2`` with that import. The daemon reads config.toml and the
files it imports, refuses to start on a file that is not TOML (as the real one does), and
records the runtimes and ``enable_cdi`` it ended up with in ``/run/gpuconf-lab/containerd.json``.
Stdlib only (the shims run python3 -S).
"""
from __future__ import annotations

import glob
import os
import re
import sys
import tomllib

import daemons
import entry
import logs
import state

CONFIG = "/etc/containerd/config.toml"
DROP_IN_DIR = "/etc/containerd/conf.d"
DROP_IN = f"{DROP_IN_DIR}/99-nvidia.toml"
IMPORTS = f"{DROP_IN_DIR}/*.toml"
CRI = 'plugins."io.containerd.grpc.v1.cri"'
VERSION = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1"


def drop_in_text(cdi: bool) -> str:
    runtime = f"{CRI}.containerd.runtimes.nvidia"
    lines = ["version = 2", "", "[plugins]", "", f"  [{CRI}]"]
    lines += ["    enable_cdi = true", ""] if cdi else [""]
    lines += [f"    [{CRI}.containerd]", "", f"      [{CRI}.containerd.runtimes]", "", f"        [{runtime}]",
              "          privileged_without_host_devices = false", '          runtime_engine = ""',
              '          runtime_root = ""', '          runtime_type = "io.containerd.runc.v2"', "",
              f"          [{runtime}.options]", '            BinaryName = "/usr/bin/nvidia-container-runtime"']
    return "\n".join(lines) + "\n"


def with_import(text: str | None) -> str:
    """config.toml with the drop-in directory imported (added to an `imports` array, or a new one)."""
    if text is None or not text.strip():
        return f'imports = ["{IMPORTS}"]\nversion = 2\n'
    match = re.search(r"^imports\s*=\s*\[(.*?)\]", text, re.M | re.S)
    if match is None:
        return f'imports = ["{IMPORTS}"]\n' + text
    if f'"{IMPORTS}"' in match[1]:
        return text
    entries = [part.strip() for part in match[1].split(",") if part.strip()] + [f'"{IMPORTS}"']
    return text[:match.start()] + f"imports = [{', '.join(entries)}]" + text[match.end():]


def configure(cdi: bool, dry_run: bool) -> int:
    text = state.read_text(CONFIG)
    if text is not None:
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            sys.stderr.write(f"ERRO[0000] unable to load config for runtime containerd: {error}\n")
            return 1
    if dry_run:
        sys.stdout.write(drop_in_text(cdi))
        return 0
    print(f"INFO[0000] Using config version 2\nINFO[0000] Wrote updated config to {DROP_IN}")
    state.write_text(DROP_IN, drop_in_text(cdi), 0o644)
    state.write_text(CONFIG, with_import(text), 0o644)
    print("INFO[0000] It is recommended that containerd daemon be restarted.")
    return 0


def loaded_config() -> dict | str:
    """config.toml merged with what it imports (tables merged, later files win), or the error."""
    merged: dict = {}
    paths = [CONFIG]
    top = None
    for path in paths:
        text = state.read_text(path)
        if text is None:
            continue
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            return f"failed to load TOML from {path}: {error}"
        if top is None:
            top = document
            for pattern in document.get("imports", []):
                found = sorted(glob.glob(state.path(pattern)))
                paths += ["/" + os.path.relpath(name, state.path("/")) for name in found]
        merge(merged, document)
    return merged


def merge(into: dict, document: dict) -> None:
    for key, value in document.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


def daemon() -> int:
    unit = "containerd.service"
    config = loaded_config()
    if isinstance(config, str):
        daemons._err("containerd", f"containerd: {config}", unit)
        return 1
    cri = config.get("plugins", {}).get("io.containerd.grpc.v1.cri", {})
    runtimes = sorted({"runc", *cri.get("containerd", {}).get("runtimes", {})})
    pid = os.getpid()
    state.write_json(f"{state.RUN}/containerd.json", {"pid": pid, "runtimes": runtimes,
                                                      "enable_cdi": cri.get("enable_cdi") is True})
    logs.journal("containerd successfully booted", "containerd", pid, unit)
    ready = os.environ.get("GPUCONF_SIM_READY")
    if ready:
        with open(ready, "w") as handle:
            handle.write("READY=1\n")
    daemons._become("containerd")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] in (["--version"], ["-v"]):
        print(VERSION)
        return 0
    if not argv:
        return daemon()
    sys.stderr.write(f"containerd: '{' '.join(argv)}' is not simulated in gpuconf lab (the daemon and --version are)\n")
    return 1


if __name__ == "__main__":
    entry.run(main)
