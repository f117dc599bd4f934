"""`gpuconf remediate`: the closed loop over a scheduler (docs/remediate.md)."""
