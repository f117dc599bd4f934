"""Generated fault scenarios for `gpuconf remediate` on the lab's real Slurm, and the invariants
checked after each (issue 35): scenario.py draws them, invariants.py judges what was observed,
runner.py runs one on a lab. `make chaos` (bench/chaos.py) runs many; tests/remediate/test_chaos_lab.py
runs a fixed few and replays the minimised failures kept in found/."""
