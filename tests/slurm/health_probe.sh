#!/bin/sh
# A HealthCheckProgram for tests/slurm/test_settings.py: each run appends a line in its node.
echo "$(date +%s) $(hostname)" >> /run/gpuconf-lab-health-probe
