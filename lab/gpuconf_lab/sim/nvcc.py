"""``nvcc`` of a simulated CUDA toolkit: prints the real ``nvcc --version`` text of its release.

The shim passes its own path first, so ``/usr/local/cuda-12.2/bin/nvcc`` (or the
``/usr/local/cuda`` alternative pointing at it) reads ``../version.json`` of the toolkit it
belongs to, as the installed files decide which compiler answers, not a global setting.
"""
from __future__ import annotations

import json
import os
import sys

import entry
import state

# nvcc version -> (built on, build id, copyright year), from the CUDA releases
RELEASES = {
    "11.7.99": ("Wed_Jun__8_16:49:14_PDT_2022", "cuda_11.7.r11.7/compiler.31442593_0", "2022"),
    "12.2.91": ("Tue_Jun_13_19:16:58_PDT_2023", "cuda_12.2.r12.2/compiler.32965470_0", "2023"),
    "12.2.140": ("Tue_Aug_15_22:02:13_PDT_2023", "cuda_12.2.r12.2/compiler.33191640_0", "2023"),
    "12.4.131": ("Thu_Mar_28_02:18:24_PDT_2024", "cuda_12.4.r12.4/compiler.34097967_0", "2024"),
    # release-day approximations: no capture of these two was found
    "12.8.93": ("Fri_Feb_21_20:23:50_PST_2025", "cuda_12.8.r12.8/compiler.35583870_0", "2025"),
    "13.0.88": ("Wed_Oct__1_20:33:35_PDT_2025", "cuda_13.0.r13.0/compiler.36560113_0", "2025"),
    "13.1.80": ("Fri_Nov__7_19:25:04_PST_2025", "cuda_13.1.r13.1/compiler.36836380_0", "2025"),  # approximated
}


def main(argv: list[str]) -> int:
    me, args = (argv[0], argv[1:]) if argv else ("/usr/local/cuda/bin/nvcc", [])
    toolkit = os.path.dirname(os.path.dirname(me if me.startswith(state.ROOT or "/") else state.path(me)))
    try:
        with open(os.path.join(toolkit, "version.json")) as handle:
            version = json.load(handle)["cuda_nvcc"]["version"]
    except (OSError, ValueError, KeyError):
        sys.stderr.write("nvcc fatal   : Could not read the toolkit's version.json\n")
        return 1
    if "--version" in args or "-V" in args:
        built, build, year = RELEASES.get(version, ("Mon_Jan__1_00:00:00_PST_2024", "cuda_unknown", "2024"))
        release = ".".join(version.split(".")[:2])
        print(f"nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-{year} NVIDIA Corporation\n"
              f"Built on {built}\nCuda compilation tools, release {release}, V{version}\nBuild {build}")
        return 0
    if not args:
        sys.stderr.write("nvcc fatal   : No input files specified; use option --help for more information\n")
        return 1
    sys.stderr.write("nvcc fatal   : compiling is not simulated in gpuconf lab (only --version is)\n")
    return 1


if __name__ == "__main__":
    entry.run(main)
