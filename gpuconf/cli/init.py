"""`gpuconf init DIR`: write a new site (gpuconf/release/site.py has its files).

Nothing is overwritten: a directory that holds anything is refused, naming what is there. The site
is written into a temporary directory beside DIR and moved into place at the end, so a failure
(a full disk) leaves no half-written site.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from gpuconf.errors import UsageError
from gpuconf.files.bounded import write_atomic
from gpuconf.release.site import MODELS, site_files


def init_site(directory: Path) -> list[str]:
    """Write the site into `directory` (missing or empty); return the files written."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"init: {directory} exists and is not a directory")
    present = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    if present:
        shown = ", ".join(present[:5]) + (", ..." if len(present) > 5 else "")
        raise UsageError(f"init: {directory} is not empty ({shown}): gpuconf init never overwrites; "
                         "give a new directory")
    parent = directory.resolve().parent
    if not parent.is_dir():
        raise UsageError(f"init: {parent} does not exist")
    files = site_files()
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.gpuconf-init-", dir=parent))
    try:
        for relative, text in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, text)
        if directory.is_dir():        # empty: take each top-level entry over
            for entry in sorted(staging.iterdir()):
                os.rename(entry, directory / entry.name)
            staging.rmdir()
        else:
            os.rename(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sorted(files)


def init(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    written = init_site(directory)
    print(f"gpuconf init: wrote a site in {directory} ({len(written)} files): inventory inventories/prod "
          f"(groups {', '.join(m.group for m in MODELS)}), gpuconf.cfg, playbooks/, README.md")
    print(f"next: put your hosts in {directory / 'inventories/prod/hosts.yml'}, then read {directory / 'README.md'}")
    return 0
