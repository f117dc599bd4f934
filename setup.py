"""The build step that puts the GPU library in the wheel (everything else is in pyproject.toml).

The roles and playbooks live at the top of the repository (`roles/`, `playbooks/`), where a checkout
and its users expect them; the wheel carries them as `gpuconf/library/roles` and
`gpuconf/library/playbooks` (and `inventories/image`, for `-i image` in an image build), copied here
at build time, so git holds one copy
(gpuconf/release/library.py finds either). Links are followed: the agent role's copies of
scripts/gpuconf-gate and scripts/gpuconf-healthcheck are links to them.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

LIBRARY = ("roles", "playbooks", "inventories/image")   # the image inventory: this machine in every node group
HERE = Path(__file__).resolve().parent


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "gpuconf" / "library"
        for name in LIBRARY:
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(HERE / name, target / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.retry"))


setup(cmdclass={"build_py": BuildWithLibrary})
