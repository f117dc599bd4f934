"""The node agent's bundle: what it holds for a node's Python, where each part comes from, and what
the node's installer does with a bundle that its Python cannot run (nothing: the old agent stays)."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import gpuconf
from gpuconf.release.bundle import (
    BundleError,
    Target,
    _sources,
    build_bundle,
    closure,
    find_wheel,
    installed_copy,
    this_target,
    wheel_tags,
)

NODE_INSTALL = Path(gpuconf.__file__).parent / "release" / "node_install.py"
# the node's installer run by a Python with no gpuconf of its own (this venv's has the checkout's, editable)
BARE_PYTHON = str(Path(sys.base_prefix) / "bin" / "python3")


def key(name: str) -> str:
    return name.lower().replace("-", "_")


def compiled_for_this_python() -> set[str]:
    """The installed distributions whose wheels suit this CPython minor only (no abi3, no py3-none)."""
    return {key(dist.metadata["Name"]) for dist in closure(this_target())
            if (tags := wheel_tags(dist)) and all(t.abi == t.interpreter for t in tags)}


def names(target: Target) -> list[str]:
    return [key(dist.metadata["Name"]) for dist in closure(target)]


def test_the_closure_is_gpuconf_and_what_it_needs_on_the_node():
    found = names(this_target())
    assert found[0] == "gpuconf"
    assert {"pydantic_core", "pyyaml", "markupsafe", "pydantic", "jinja2", "paramiko", "packaging"} <= set(found)
    assert "pytest" not in found and "gpuconf_lab" not in found


def test_this_checkout_is_bundled_from_its_files_not_from_an_installed_wheel():
    gpuconf_dist = closure(this_target())[0]
    assert not installed_copy(gpuconf_dist)   # make venv installs it editable: the checkout is what runs


def test_a_node_python_the_controller_is_not_needs_wheels_it_names(tmp_path):
    target = Target((sys.version_info[0], sys.version_info[1] + 1), "x86_64")
    with pytest.raises(BundleError) as refused:
        _sources(closure(target), target, tmp_path, None, download=False)
    message = str(refused.value)
    assert message.startswith(f"the node runs {target}, and this controller (CPython 3.{sys.version_info[1]}) has "
                              "no wheel of ")
    missing = {key(part.split("==")[0]) for part in message.split("has no wheel of ")[1].split(" for it")[0].split()}
    # the pure wheels (jinja2, pydantic, ...) and the abi3 ones (cryptography) come from this controller
    assert missing == compiled_for_this_python() and {"pydantic_core", "pyyaml", "markupsafe"} <= missing
    assert f"--python-version 3.{sys.version_info[1] + 1}" in message and "--only-binary=:all:" in message
    with pytest.raises(BundleError):
        build_bundle(target, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == []   # nothing built, nothing left


def test_a_wheelhouse_wheel_of_the_same_version_and_a_suiting_tag_is_taken(tmp_path):
    target = Target((3, 12), "x86_64")
    for name in ("pydantic_core-2.50.5-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                 "pydantic_core-2.50.5-cp313-cp313-manylinux_2_17_x86_64.whl",
                 "pydantic_core-2.50.4-cp312-cp312-manylinux_2_17_x86_64.whl",
                 "pydantic_core-2.50.5-cp312-cp312-manylinux_2_17_aarch64.whl"):
        zipfile.ZipFile(tmp_path / name, "w").close()
    found = find_wheel("pydantic-core", "2.50.5", target, [tmp_path])
    assert found is not None and found.name.startswith("pydantic_core-2.50.5-cp312-cp312-manylinux_2_17_x86_64")
    assert find_wheel("pydantic-core", "2.50.5", Target((3, 12), "aarch64"), [tmp_path]).name.endswith(
        "aarch64.whl")
    assert find_wheel("pydantic-core", "2.50.5", Target((3, 11), "x86_64"), [tmp_path]) is None


def fake_bundle(path: Path, version: str) -> None:
    """A bundle whose site has a gpuconf without its dependencies: it unpacks, and cannot run."""
    with tarfile.open(path, "w:gz") as archive:
        for name, text in (("bundle.json", json.dumps({"version": version, "compiled": True,
                                                        "python": "{}.{}".format(*sys.version_info[:2])})),
                           ("site/gpuconf/__init__.py", f'__version__ = "{version}"\n')):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_a_bundle_the_nodes_python_cannot_run_changes_nothing_on_the_node(tmp_path):
    prefix, bundle = tmp_path / "opt" / "gpuconf", tmp_path / "bundle.tar.gz"
    fake_bundle(bundle, "9.9.9")
    done = subprocess.run([BARE_PYTHON, "-I", "-c", NODE_INSTALL.read_text(), str(bundle), str(prefix), "9.9.9",
                           "cp311-x86_64"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(f"gpuconf agent: this Python ({BARE_PYTHON}) cannot run the bundle: ")
    assert "No module named 'gpuconf.cli'" in done.stderr
    assert sorted(p.name for p in prefix.iterdir()) == ["bin", "releases"]   # no current, no agent.json
    assert list((prefix / "releases").iterdir()) == [] and list((prefix / "bin").iterdir()) == []
    assert not bundle.exists()


def test_a_bundle_for_another_version_or_python_is_refused(tmp_path):
    prefix, bundle = tmp_path / "opt", tmp_path / "bundle.tar.gz"
    fake_bundle(bundle, "9.9.8")
    done = subprocess.run([BARE_PYTHON, "-I", "-c", NODE_INSTALL.read_text(), str(bundle), str(prefix), "9.9.9",
                           "cp311-x86_64"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "the bundle is gpuconf 9.9.8 for Python" in done.stderr
