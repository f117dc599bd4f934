"""The scheduler a run's results are used for: the `Scheduler` interface and its one node model
(`interface`), Slurm behind it (`slurm`), the drain rules of `check --slurm` and of the node's
health check (`healthcheck`), and `check --slurm`'s step after the run (`step`). Nothing in the
engine, the results or the reporters imports this package."""
