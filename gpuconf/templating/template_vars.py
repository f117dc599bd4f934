"""The variables ansible-core 2.19 gives a template file besides the task's (template_path, ...),
for the template module and lookup('template')."""
from __future__ import annotations

import datetime
import os
import pwd
from pathlib import Path
from typing import Any


def template_vars(path: str, fullpath: Path, dest: str | None = None) -> dict[str, Any]:
    """What ansible-core 2.19 gives a template file besides the task's variables: the template as
    the task named it (`template_path`) and found it (`template_fullpath`), where it is written
    (`template_destpath`), its owner and modification time, the controller's name, and now."""
    stat = fullpath.stat()
    try:
        owner: str | int = pwd.getpwuid(stat.st_uid).pw_name
    except KeyError:
        owner = stat.st_uid
    return {"template_host": os.uname()[1], "template_path": path, "template_fullpath": str(fullpath),
            "template_destpath": dest, "template_uid": owner,
            "template_mtime": datetime.datetime.fromtimestamp(stat.st_mtime),
            "template_run_date": datetime.datetime.now()}
