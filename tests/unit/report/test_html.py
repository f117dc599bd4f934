"""The HTML fleet report, opened in a real headless Chromium (Debian's `chromium`).

Chromium loads the file with an address that selects a cell or a filter, runs its
script (virtual time, so no sleep), and dumps the DOM; the test reads the matrix
and the opened cell from that DOM. A screenshot of the 1,000-host report is kept
under the test's tmp dir as an artefact (its path is printed).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gpuconf.cli.main import main
from gpuconf.report import html
from tests.unit.report.fleet import ROLES, synthetic_run
from tests.unit.report.helpers import SECRET, write_playbook

DRIFTED, FAILED, UNREACHABLE = (7, 8, 9, 500), (3, 999), (1000,)


def chromium() -> str:
    path = shutil.which("chromium")
    if not path:
        pytest.fail("chromium is missing: run scripts/system-deps.sh (Debian package chromium)")
    return path


def browse(page: Path, fragment: str, profile: Path, screenshot: Path | None = None) -> str:
    """The DOM after the page's script ran (or, with `screenshot`, a PNG of it)."""
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            f"--user-data-dir={profile}", "--run-all-compositor-stages-before-draw", "--virtual-time-budget=10000",
            "--window-size=1400,900"]
    argv += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    proc = subprocess.run(argv + [f"{page.as_uri()}#{fragment}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class Dom(HTMLParser):
    """The matrix rows (host, cell classes, hidden) and the text of the detail panel."""

    def __init__(self, text: str):
        super().__init__()
        self.rows: list[dict] = []
        self.headers: list[str] = []
        self.detail: list[str] = []
        self.selected: list[tuple[str, int]] = []
        self.stack: list[str] = []
        self.in_detail = 0
        self.where = ""
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id") == "detail":
            self.in_detail = 1
        elif self.in_detail and tag not in ("br",):
            self.in_detail += 1
        if tag == "tr" and "data-i" in attrs:
            self.rows.append({"cells": [], "hidden": "hidden" in attrs, "host": ""})
        if tag == "td" and self.rows:
            self.rows[-1]["cells"].append(attrs.get("class", ""))
        self.where = tag

    def handle_endtag(self, tag):
        if self.in_detail:
            self.in_detail -= 1

    def handle_data(self, data):
        if self.in_detail:
            self.detail.append(data)
        elif self.where == "th" and self.rows and not self.rows[-1]["host"] and data.strip():
            self.rows[-1]["host"] = data.strip()
        elif self.where == "th" and not self.rows and data.strip():
            self.headers.append(data.strip())

    @property
    def detail_text(self) -> str:
        return "".join(self.detail)


@pytest.fixture(scope="module")
def fleet_page(tmp_path_factory) -> Path:
    page = tmp_path_factory.mktemp("html") / "fleet.html"
    html.write(synthetic_run(1000, drifted=DRIFTED, failed=FAILED, unreachable=UNREACHABLE), page)
    return page


def test_the_file_is_self_contained(fleet_page):
    text = fleet_page.read_text()
    assert not re.search(r"""(src|href)\s*=|url\(|@import|https?://""", text), "the report fetches something"
    assert "<script>" in text and "<style>" in text


def test_chromium_draws_1000_hosts_by_roles_coloured_by_status_and_opens_a_failed_cell(fleet_page, tmp_path):
    dom = Dom(browse(fleet_page, "host=a100-003&role=fabricmanager", tmp_path / "profile"))
    assert dom.headers == ["host", *ROLES]
    assert len(dom.rows) == 1000 and dom.rows[2]["host"] == "a100-003"
    classes = [cls.split()[0] for row in dom.rows for cls in row["cells"]]
    assert classes.count("s5") == 2 * 2  # failed: fabricmanager and health on two hosts
    assert classes.count("s1") == 4  # drift: cuda on four hosts
    assert classes.count("s6") == len(ROLES)  # the unreachable host, every role
    assert classes.count("s0") == 1000 * len(ROLES) - 8 - len(ROLES)
    assert "selected" in dom.rows[2]["cells"][ROLES.index("fabricmanager")]
    detail = dom.detail_text
    assert "a100-003 · fabricmanager: failed" in detail
    assert "nvidia-fabricmanager.service: failed to start" in detail and "4 tasks in sync" in detail


def test_an_opened_cell_shows_its_diff_and_its_findings(fleet_page, tmp_path):
    detail = Dom(browse(fleet_page, "host=a100-500&role=cuda", tmp_path / "profile")).detail_text
    assert "install cuda-toolkit-12-8 (12.8.1-1)" in detail and "write /etc/profile.d/cuda.sh" in detail
    assert "+PATH=/usr/local/cuda-12.8/bin" in detail and "-PATH=/usr/local/cuda-12.4/bin" in detail
    detail = Dom(browse(fleet_page, "host=a100-999&role=health", tmp_path / "profile")).detail_text
    assert "failure: xid gpu 3: Xid 79: fallen off the bus" in detail


def test_the_filter_box_keeps_matching_hosts_by_name_or_status(fleet_page, tmp_path):
    rows = Dom(browse(fleet_page, "filter=a100-00", tmp_path / "profile")).rows
    assert [r["host"] for r in rows if not r["hidden"]] == [f"a100-00{i}" for i in range(1, 10)]
    rows = Dom(browse(fleet_page, "filter=failed", tmp_path / "profile")).rows
    assert [r["host"] for r in rows if not r["hidden"]] == ["a100-003", "a100-999"]


def test_a_screenshot_is_kept_as_an_artefact(fleet_page, tmp_path):
    shot = tmp_path / "fleet-report.png"
    browse(fleet_page, "host=a100-007&role=cuda&filter=a100-0", tmp_path / "profile", screenshot=shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"\nHTML report screenshot: {shot}")


def test_the_cli_writes_it_and_a_no_log_task_keeps_its_secret(tmp_path, capsys):
    page = tmp_path / "run.html"
    code = main(["check", str(write_playbook(tmp_path)), "-i", "h1,h2,", "-c", "local", "--no-retry-file",
                 "--html", str(page)])
    capsys.readouterr()
    assert code == 2 | 4
    text = page.read_text()
    assert SECRET not in text
    detail = Dom(browse(page, "host=h2&role=(play)", tmp_path / "profile")).detail_text
    assert "file drifted" in detail and "probe that fails" in detail and "secret token" in detail


# the a100 playbook's roles: a matrix as wide as the one the issue saw scroll the page sideways
A100_ROLES = ["nouveau", "nvidia_driver", "cuda", "cuda_env", "reboot", "persistence", "fabricmanager", "dcgm",
              "opensm", "infiniband", "container_toolkit"]
DRIVER_TASKS = """\
- name: GPU packages
  package: {name: [gpuconf-absent-one, gpuconf-absent-two], version: "580.178.04-1", hold: true, backend: apt}
- name: the driver probe
  block:
    - name: probe that fails in its block
      probe: {command: "echo block broke >&2; exit 3", pending_in_check: false}
  rescue:
    - name: say it was rescued
      debug: {msg: rescued}
- name: probe with ignore_errors
  ignore_errors: true
  probe: {command: "echo ignored breakage >&2; exit 4", pending_in_check: false}
"""


@pytest.fixture
def a100_like_page(tmp_path) -> Path:
    """The HTML report of a real local check: 11 roles, one with a package diff (apt reads this
    machine's dpkg: the two packages do not exist), a rescued failure and an ignored one."""
    for role in A100_ROLES:
        tasks = tmp_path / "roles" / role / "tasks"
        tasks.mkdir(parents=True)
        (tasks / "main.yml").write_text(DRIVER_TASKS if role == "nvidia_driver" else
                                        f'- name: {role} file\n  file: {{path: "{tmp_path}/{role}.conf", content: "x"}}\n')
    playbook = tmp_path / "site.yml"
    playbook.write_text(f"- name: a100-like play\n  hosts: all\n  roles: [{', '.join(A100_ROLES)}]\n")
    page = tmp_path / "a100.html"
    code = main(["check", str(playbook), "-i", "a100-001,a100-002,", "-c", "local", "--no-retry-file",
                 "--html", str(page)])
    assert code == 2, code  # drift; the two failures were rescued and ignored
    return page


def page_width(page: Path, fragment: str, profile: Path) -> tuple[int, int, int, int]:
    """The page's scrollWidth and clientWidth (the window less a vertical scrollbar), and the matrix
    panel's, in Chromium at 1,400 px: a probe script appended to a copy of the report writes them
    into the DOM it dumps."""
    probe = page.with_name("probe-" + page.name)
    box = 'document.getElementById("matrix-box")'
    probe.write_text(page.read_text().replace("</body>", (
        f'<script>const root = document.scrollingElement;'
        f'document.body.dataset.width = [root.scrollWidth, root.clientWidth, {box}.scrollWidth, '
        f'{box}.clientWidth].join(" ");</script></body>')))
    found = re.search(r'data-width="(\d+) (\d+) (\d+) (\d+)"', browse(probe, fragment, profile))
    assert found, "the probe did not run"
    page_scroll, page_client, box_scroll, box_client = (int(n) for n in found.groups())
    return page_scroll, page_client, box_scroll, box_client


def test_at_1400_px_the_page_never_scrolls_sideways_and_a_cell_shows_versions_and_every_failure(a100_like_page,
                                                                                                tmp_path):
    fragment = "host=a100-002&role=nvidia_driver"
    page_scroll, page_client, box_scroll, box_client = page_width(a100_like_page, fragment, tmp_path / "profile")
    assert page_scroll <= page_client <= 1400
    assert box_scroll > box_client  # the grid is wider than its panel: it scrolls there, not the page
    shot = tmp_path / "a100-report.png"
    browse(a100_like_page, fragment, tmp_path / "profile", screenshot=shot)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1400
    print(f"\nHTML report screenshot at 1400 px: {shot}")

    detail = Dom(browse(a100_like_page, fragment, tmp_path / "profile")).detail_text
    assert "a100-002 · nvidia_driver" in detail
    for name in ("gpuconf-absent-one", "gpuconf-absent-two"):
        assert f"{name}: (none) → 580.178.04-1" in detail
    assert "None" not in detail and "{" not in detail  # no Python repr of the versions
    for message in ("install gpuconf-absent-one 580.178.04-1", "hold gpuconf-absent-one"):
        assert detail.count(message) == 1, detail  # each change said once, not again as the task's message
    assert "probe that fails in its block" in detail and "block broke" in detail  # rescued
    assert "probe with ignore_errors" in detail and "ignored breakage" in detail  # ignored
    assert detail.count("failed, ignored or rescued") == 2
