"""The product ships no simulator: the lab (lab/, gpuconf-lab) is its own distribution.

`pip install .` of the product must install the engine only, and the engine must never import
the lab; `gpuconf lab ...` runs the separate `gpuconf-lab` program.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def test_the_product_installs_no_simulator(tmp_path):
    # What `pip install .` puts in the wheel is what setuptools' build_py copies (packages and
    # package data) plus the egg-info's entry points: run both on a copy of the sources, the lab
    # next to the product as in the checkout, so the checkout gets no build/ or egg-info.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "*.pyc")
    for name in ("gpuconf", "lab"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    built = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "--quiet",
                            "egg_info", "--egg-base", str(tmp_path), "build_py", "--build-lib", str(tmp_path / "lib")],
                           cwd=source, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    names = [str(path.relative_to(tmp_path / "lib")) for path in (tmp_path / "lib").rglob("*") if path.is_file()]
    assert "gpuconf/cli/main.py" in names and "gpuconf/engine/runner.py" in names   # the product is all there
    assert [name for name in names if not name.startswith("gpuconf/")] == []
    assert [name for name in names if "lab" in Path(name).parts or "sim" in Path(name).parts] == []
    entry_points = (tmp_path / "gpuconf.egg-info" / "entry_points.txt").read_text()
    assert "gpuconf = gpuconf.cli.main:run" in entry_points and "gpuconf-lab" not in entry_points


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
