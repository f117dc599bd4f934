"""gpuconf as a user gets it: the wheel of this checkout, built once per session, and a fresh virtual
environment outside the repository with that wheel installed (its dependencies from the package
index, as `pip install` fetches them)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What a wheel is built from (MANIFEST.in and setup.py say the same for an sdist)
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md",
           "gpuconf", "roles", "playbooks", "scripts", "inventories/image")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.retry", "build", "*.egg-info")


def build_wheel(dest: Path, version: str | None = None) -> Path:
    """The wheel of this checkout's sources (copied first: the checkout gets no build/), with
    `version` as gpuconf.__version__ when given (a release after this one)."""
    source = dest / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=_IGNORE, symlinks=True)
        elif path.exists():
            shutil.copy(path, source / name)
    if version is not None:
        init = source / "gpuconf" / "__init__.py"
        init.write_text(re.sub(r'__version__ = "[^"]*"', f'__version__ = "{version}"', init.read_text()))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                            "--wheel-dir", str(dest), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = sorted(dest.glob("gpuconf-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="session")
def gpuconf_wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def installed_gpuconf(gpuconf_wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment (outside the repository) with the wheel installed: its bin/."""
    venv = tmp_path_factory.mktemp("controller") / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                                str(gpuconf_wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv / "bin"
