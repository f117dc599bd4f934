from gpuconf.cli import run

raise SystemExit(run())
