"""`gpuconf remediate`: the closed loop over a scheduler (docs/remediate.md). It owns the
waves and their budget, the decisions (which action a finding needs), the ladder (evidence, reset,
reboot, verify, resume), hardware holds, the circuit breaker, lemons, the evidence bundle
(`evidence`) and the history and write-ahead journal in SQLite (`history`)."""
