"""Where gpuconf keeps what it writes on the machine it runs on: the state directory (the
remediation history, evidence bundles, firmware backups). One definition, read by every verb."""
from __future__ import annotations

import os
from pathlib import Path


def state_dir(given: str | None = None) -> Path:
    """The state directory: `given` (--state-dir), else GPUCONF_STATE_DIR, else
    $XDG_STATE_HOME/gpuconf, else ~/.local/state/gpuconf."""
    if given:
        return Path(given).expanduser()
    if os.environ.get("GPUCONF_STATE_DIR"):
        return Path(os.environ["GPUCONF_STATE_DIR"]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "gpuconf"


def bundles_dir(where: Path | None = None) -> Path:
    """The evidence bundles' directory (`gpuconf collect`, remediate, firmware backups)."""
    return (where or state_dir()) / "bundles"
