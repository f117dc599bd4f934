"""Planning and running: plays over hosts (the planner, the variables and their precedence),
tasks over a host (the executor, handlers, blocks, loops, joint package transactions, reboot
waits), the failure boundary where exceptions become results, and the steps after a run."""
