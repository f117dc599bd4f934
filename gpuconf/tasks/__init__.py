"""Task types: the contract (`base`: reads, a pure check, apply, the re-check), one module per
family, the registry that finds a type by name, and the health probes (`health/`)."""
