"""Where gpuconf keeps what it writes on the machine it runs on: the state directory (the
remediation history, evidence bundles, firmware backups). One definition, read by every verb."""
from __future__ import annotations

import os
from pathlib import Path


def default_state_dir() -> Path:
    """GPUCONF_STATE_DIR, else $XDG_STATE_HOME/gpuconf, else ~/.local/state/gpuconf."""
    if os.environ.get("GPUCONF_STATE_DIR"):
        return Path(os.environ["GPUCONF_STATE_DIR"]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "gpuconf"


def bundles_dir(state_dir: Path | None = None) -> Path:
    """The evidence bundles' directory (`gpuconf collect`, remediate, firmware backups)."""
    return (state_dir or default_state_dir()) / "bundles"
