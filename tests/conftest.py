"""Fixtures shared across the suite. The lab's live in tests/lab_fixtures.py; the
reliability figures printed at the end in tests/figures.py."""
import atexit
import os
import shutil
import tempfile

pytest_plugins = ["tests.lab_fixtures", "tests.figures"]

# The remote runner's derived-data cache (what an initramfs holds) for runs on this machine
# (-c local, the runner tests): a directory of the session's own, never the machine's
# /var/cache, which lab nodes see through their overlay. Nodes reached over SSH keep theirs.
if "GPUCONF_CACHE_DIR" not in os.environ:
    os.environ["GPUCONF_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpuconf-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GPUCONF_CACHE_DIR"], True)
