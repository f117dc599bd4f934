"""`python -m gpuconf.lab ...` is `gpuconf lab ...`."""
import sys

from gpuconf.lab.cli import main

sys.exit(main(sys.argv[1:]))
