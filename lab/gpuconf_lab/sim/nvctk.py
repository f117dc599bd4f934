"""``nvidia-ctk runtime configure``, ``nvidia-ctk cdi`` (``nvctk_cdi``) and ``nvidia-container-runtime``.

``nvidia-ctk runtime configure --runtime=docker [--set-as-default]`` merges the ``nvidia``
runtime into ``/etc/docker/daemon.json`` and keeps every other key, as the real tool does
(it loads the file, sets two keys, writes it back indented, keys sorted like Go's encoder).
``--runtime=containerd [--cdi.enabled]`` writes the drop-in of toolkit 1.18+ (``containerd.py``).
The package's shims pass the tool name and the toolkit version first (``nvidia-ctk 1.17.8 ...``).
"""
from __future__ import annotations

import json
import os
import sys

import containerd
import entry
import nvctk_cdi
import state


def configure(args: list[str]) -> int:
    runtime, config_file, default, dry_run, cdi = "docker", None, False, False, False
    for i, arg in enumerate(args):
        key, _, value = arg.partition("=")
        if key == "--runtime":
            runtime = value or (args[i + 1] if i + 1 < len(args) else "")
        elif key in ("--config", "--config-file"):
            config_file = value or (args[i + 1] if i + 1 < len(args) else "")
        elif key == "--set-as-default":
            default = value.lower() not in ("false", "0")
        elif key == "--dry-run":
            dry_run = True
        elif key == "--cdi.enabled":
            cdi = value.lower() not in ("false", "0")
    if runtime == "containerd":
        return containerd.configure(cdi, dry_run)
    if runtime != "docker":
        sys.stderr.write(f"ERRO[0000] unable to configure runtime: runtime {runtime} is not simulated in gpuconf lab\n")
        return 1
    config_file = config_file or "/etc/docker/daemon.json"
    text = state.read_text(config_file)
    config: dict = {}
    if text is None:
        print("INFO[0000] Config file does not exist; using empty config")
    else:
        print(f"INFO[0000] Loading config from {config_file}")
        if text.strip():
            try:
                config = json.loads(text)
            except ValueError as error:
                sys.stderr.write(f"ERRO[0000] unable to load config for runtime {runtime}: could not load config: "
                                 f"{error}\n")
                return 1
    config.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    if default:
        config["default-runtime"] = "nvidia"
    output = json.dumps(config, indent=4, sort_keys=True)
    if dry_run:
        print(output)
        return 0
    real = state.path(config_file)
    mode = os.stat(real).st_mode & 0o777 if os.path.exists(real) else 0o644
    state.write_text(config_file, output, mode)
    print(f"INFO[0000] Wrote updated config to {config_file}")
    print("INFO[0000] It is recommended that docker daemon be restarted.")
    return 0


def main(argv: list[str]) -> int:
    tool, version, args = (argv[0], argv[1], argv[2:]) if len(argv) > 1 else ("nvidia-ctk", "1.16.2", [])
    if tool == "nvidia-container-runtime":
        if "--version" in args:
            print(f"NVIDIA Container Runtime version {version}")
            return 0
        sys.stderr.write("nvidia-container-runtime: running containers is not simulated in gpuconf lab\n")
        return 1
    if args[:1] in (["--version"], ["-v"]):
        print(f"NVIDIA Container Toolkit CLI version {version}\ncommit: 68f7b2f58fcbbc4ba1b4c4dbd1b55a0d3be9e3ed")
        return 0
    if args[:2] == ["runtime", "configure"]:
        return configure(args[2:])
    if args[:2] == ["cdi", "generate"]:
        return nvctk_cdi.generate(version, args[2:])
    if args[:2] == ["cdi", "list"]:
        return nvctk_cdi.list_devices()
    sys.stderr.write("NAME:\n   NVIDIA Container Toolkit CLI - Tools to configure the NVIDIA Container Toolkit\n")
    return 1


if __name__ == "__main__":
    entry.run(main)
