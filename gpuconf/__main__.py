from gpuconf.cli.main import run

raise SystemExit(run())
