"""Installs the gpuconf agent on a node: run there by the gpuconf_agent task (gpuconf/tasks/agent.py),
with the node's chosen Python (`python -I -c <this file> BUNDLE PREFIX VERSION TAG`), as root.

Standard library only: nothing of gpuconf is on the node before this runs (the Python is one the
task chose for gpuconf, so 3.11 or newer). It unpacks the bundle
(gpuconf/release/bundle.py) into PREFIX/releases/VERSION-TAG, byte-compiles it unless the
controller did, proves that this Python imports it (the compiled libraries included), and only
then switches PREFIX/current to it, writes the launcher PREFIX/bin/gpuconf and PREFIX/agent.json
(each atomically: a temporary file and a rename). A failure leaves the agent that was there.
Older releases are removed; the bundle file too.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
from typing import NoReturn

# What must import for the agent to run its commands (gate, check -c local, the drift timer).
PROBE = ("import sys; sys.path.insert(0, sys.argv[1]); import gpuconf, gpuconf.cli.main, gpuconf.gate.node, "
         "gpuconf.scheduler.healthcheck, pydantic_core, yaml, jinja2, paramiko; print(gpuconf.__version__)")

LAUNCHER = """#!{python} -I
# gpuconf {version}, the node agent installed by gpuconf's gpuconf_agent role (gpuconf-agent.yml):
# run from {prefix}/current, on {python}. Do not edit: the next apply replaces it.
import sys

sys.path.insert(0, {site!r})
from gpuconf.cli.main import run

sys.exit(run())
"""


def fail(message: str) -> NoReturn:
    sys.stderr.write(f"gpuconf agent: {message}\n")
    sys.exit(1)


def write_atomic(path: str, text: str, mode: int) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def unpack(bundle: str, into: str, version: str) -> dict[str, object]:
    shutil.rmtree(into, ignore_errors=True)
    with tarfile.open(bundle) as archive:
        if hasattr(tarfile, "data_filter"):   # 3.11.4 and later; the bundle is the controller's own
            archive.extractall(into, filter="data")
        else:
            archive.extractall(into)
    with open(os.path.join(into, "bundle.json")) as handle:
        info: dict[str, object] = json.load(handle)   # bundle.json: the controller's own
    running = "{}.{}".format(*sys.version_info[:2])
    if info.get("version") != version or info.get("python") != running:
        fail(f"the bundle is gpuconf {info.get('version')} for Python {info.get('python')}, not {version} for "
             f"this Python {running}")
    if not info.get("compiled"):
        import compileall

        compileall.compile_dir(os.path.join(into, "site"), quiet=2)
    return info


def prove(site: str, version: str) -> None:
    done = subprocess.run([sys.executable, "-I", "-c", PROBE, site], capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or done.stdout.strip() != version:
        tail = (done.stderr.strip().splitlines() or ["(nothing)"])[-1]
        fail(f"this Python ({sys.executable}) cannot run the bundle: {tail}")


def main(bundle: str, prefix: str, version: str, tag: str) -> None:
    releases = os.path.join(prefix, "releases")
    for folder in (prefix, releases, os.path.join(prefix, "bin")):
        os.makedirs(folder, mode=0o755, exist_ok=True)
    name = f"{version}-{tag}"
    release = os.path.join(releases, name)
    if not os.path.isfile(os.path.join(release, "bundle.json")):
        partial = release + ".partial"
        try:
            unpack(bundle, partial, version)
            prove(os.path.join(partial, "site"), version)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            os.unlink(bundle)
            raise
        shutil.rmtree(release, ignore_errors=True)
        os.rename(partial, release)
    prove(os.path.join(release, "site"), version)
    current = os.path.join(prefix, "current")
    link = f"{current}.{os.getpid()}.tmp"
    os.symlink(os.path.join("releases", name), link)
    os.replace(link, current)
    site = os.path.join(current, "site")
    write_atomic(os.path.join(prefix, "bin", "gpuconf"),
                 LAUNCHER.format(python=sys.executable, version=version, prefix=prefix, site=site), 0o755)
    write_atomic(os.path.join(prefix, "agent.json"), json.dumps(
        {"version": version, "tag": tag, "python": sys.executable,
         "python_version": "{}.{}.{}".format(*sys.version_info[:3]), "release": release}, indent=1) + "\n", 0o644)
    for other in os.listdir(releases):
        if other != name:
            shutil.rmtree(os.path.join(releases, other), ignore_errors=True)
    os.unlink(bundle)
    print(f"gpuconf agent {version} installed in {release}, on {sys.executable}")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        fail("usage: python -I node_install.py BUNDLE PREFIX VERSION TAG")
    main(*sys.argv[1:])
