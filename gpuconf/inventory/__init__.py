"""The inventory: hosts, groups and their variables, from YAML, INI or an executable source,
with group_vars and host_vars; the patterns of `--limit` and `hosts:`; the views of `gpuconf
inventory` (`--graph`, `--list`). It knows nothing of connections or playbooks."""
