"""Real local runs for the report tests: the CLI, in this process, on this machine (`-c local`)."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from gpuconf.cli.main import main

SECRET = "hunter2-do-not-print"


def write_playbook(tmp: Path) -> Path:
    """Two local hosts; per host: in sync, drift, a secret, a skipped task, then a failing probe."""
    (tmp / "present.txt").write_text("ok\n")
    playbook = tmp / "site.yml"
    playbook.write_text(textwrap.dedent(f"""\
        - name: report play
          hosts: all
          tasks:
            - name: file in sync
              file: {{path: "{tmp}/present.txt", content: "ok\\n"}}
            - name: file drifted
              file: {{path: "{tmp}/{{{{ inventory_hostname }}}}-new.txt", content: "new <&> \\"quoted\\"\\n"}}
            - name: secret token
              no_log: true
              file: {{path: "{tmp}/{{{{ inventory_hostname }}}}-token", content: "{SECRET}\\n", mode: "0600"}}
            - name: never on this host
              when: false
              file: {{path: "{tmp}/never", content: "x"}}
            - name: probe that fails
              probe: {{command: "echo broken >&2; exit 3", pending_in_check: false}}
        """))
    return playbook


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def normalise(text: str, tmp: Path) -> str:
    """Stable text for golden comparisons: no temp paths, times or durations."""
    text = text.replace(str(tmp), "<tmp>")
    text = re.sub(r'(time|timestamp)="[^"]*"', r'\1="-"', text)
    text = re.sub(r"^(gpuconf_(last_run_timestamp|run_duration)_seconds) .*$", r"\1 -", text, flags=re.M)
    return text


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())
