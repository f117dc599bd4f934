"""Draw docs/grafana/gpuconf-fleet.png: the dashboard's layout (panel grid, titles, queries) from
its JSON, in headless Chromium. A layout preview, not a Grafana screenshot: run
`python3 docs/grafana/preview.py` after editing the dashboard."""
import html
import json
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMN, ROW = 58, 34  # pixels per Grafana grid unit (24 columns)


def page(dashboard: dict) -> str:
    boxes = []
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        queries = "".join(f"<code>{html.escape(t['expr'])}</code>" for t in panel["targets"])
        boxes.append(f'<div class="panel" style="left:{grid["x"] * COLUMN + 8}px;top:{grid["y"] * ROW + 48}px;'
                     f'width:{grid["w"] * COLUMN - 8}px;height:{grid["h"] * ROW - 8}px">'
                     f'<b>{html.escape(panel["title"])}</b> <i>{panel["type"]}</i>{queries}</div>')
    return ("<html><body style='margin:0;background:#111217;color:#ccccdc;font:12px sans-serif'>"
            f"<div style='padding:12px 8px;font-size:16px'>{html.escape(dashboard['title'])} "
            "<span style='color:#888;font-size:12px'>(layout preview drawn from the JSON)</span></div>"
            "<style>.panel{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:3px;"
            "padding:6px;overflow:hidden}.panel i{color:#6e9fff}.panel code{display:block;margin-top:6px;"
            "color:#9ac48a;font-size:11px;white-space:pre-wrap}</style>" + "".join(boxes) + "</body></html>")


def main() -> None:
    dashboard = json.loads((HERE / "gpuconf-fleet.json").read_text())
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"]) * ROW + 56
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "preview.html"
        source.write_text(page(dashboard))
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp}/p",
                        f"--window-size={24 * COLUMN + 16},{height}", f"--screenshot={HERE / 'gpuconf-fleet.png'}",
                        source.as_uri()], check=True, capture_output=True, timeout=120)


if __name__ == "__main__":
    main()
