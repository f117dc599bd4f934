"""Planning and running: plays over hosts, tasks over a host, handlers, reboots."""
