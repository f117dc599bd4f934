"""The product ships no simulator: the lab (lab/, gpuconf-lab) is its own distribution.

`pip install .` of the product must install the engine only, and the engine must never import
the lab; `gpuconf lab ...` runs the separate `gpuconf-lab` program.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import gpuconf
from gpuconf.cli import main as cli

ROOT = Path(__file__).parents[2]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_module_of_the_product_imports_the_lab():
    offenders = {str(path.relative_to(ROOT)): sorted(name for name in imported_modules(path)
                                                      if name.split(".")[0] == "gpuconf_lab"
                                                      or name.startswith("gpuconf.lab"))
                 for path in (ROOT / "gpuconf").rglob("*.py")}
    assert {path: names for path, names in offenders.items() if names} == {}
    assert not (ROOT / "gpuconf" / "lab").exists()


def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_product_installs_no_simulator(gpuconf_wheel):
    # the wheel `pip install .` installs (built once per session from a copy of the sources)
    names = wheel_names(gpuconf_wheel)
    assert "gpuconf/cli/main.py" in names and "gpuconf/engine/runner.py" in names   # the product is all there
    assert [name for name in names if not name.startswith(("gpuconf/", "gpuconf-"))] == []
    assert [name for name in names if "gpuconf_lab" in name or "/sim/" in name] == []
    # ansible-core's integration targets (GPLv3, tests/conformance/README.md) are test data, never shipped
    assert [name for name in names if "conformance" in name or "runme.sh" in name] == []
    with zipfile.ZipFile(gpuconf_wheel) as archive:
        info = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
        entry_points = archive.read(info).decode()
    assert "gpuconf = gpuconf.cli.main:run" in entry_points and "gpuconf-lab" not in entry_points


def test_the_wheel_carries_the_gpu_library_and_the_licence(gpuconf_wheel):
    names = set(wheel_names(gpuconf_wheel))
    shipped = {name.removeprefix("gpuconf/library/") for name in names if name.startswith("gpuconf/library/")}
    in_git = {path.relative_to(ROOT).as_posix() for top in ("roles", "playbooks", "inventories/image")
              for path in (ROOT / top).rglob("*") if path.is_file() and "__pycache__" not in path.parts
              and path.suffix not in (".pyc", ".retry")}
    assert shipped == in_git   # every role and playbook, and nothing else, one copy in git
    assert not (ROOT / "gpuconf" / "library").exists()
    with zipfile.ZipFile(gpuconf_wheel) as archive:
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        licence = archive.read(next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))).decode()
    assert "License-Expression: Apache-2.0" in metadata and f"Version: {gpuconf.__version__}" in metadata
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence


def test_gpuconf_lab_without_the_lab_installed_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cli.main(["lab", "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuconf: error: the lab is not installed") and "pip install ./lab" in err


def test_gpuconf_lab_runs_the_gpuconf_lab_program_with_its_arguments():
    gpuconf = Path(sys.executable).with_name("gpuconf")
    if not os.access(gpuconf, os.X_OK) or cli.lab_program() is None:
        import pytest
        pytest.skip("gpuconf and gpuconf-lab are not installed in this environment (make venv installs both)")
    proc = subprocess.run([str(gpuconf), "lab", "fault", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: gpuconf lab fault") and "sshd-down" in proc.stdout
