"""`python -m gpuconf_lab ...` is `gpuconf lab ...`."""
import sys

from gpuconf_lab.cli import main

sys.exit(main(sys.argv[1:]))
