#!/bin/sh
# gpuconf lab: lsmod (kmod 30), which formats /proc/modules: here the simulated one, which the
# runtime also binds over /proc/modules where the machine's kernel has that file. A shell
# script, not Python: the real tool is a small C program, and a node with /proc/modules is not
# asked to run it at all, so the lab's stand-in should cost about as little.
modules="${GPUCONF_SIM_ROOT:-}/run/gpuconf-lab/proc/modules"
echo "Module                  Size  Used by"
[ -r "$modules" ] || exit 0
while read -r name size refcount users _rest; do
    if [ "$users" = "-" ]; then
        printf '%-19s %8s  %s\n' "$name" "$size" "$refcount"
    else
        printf '%-19s %8s  %s %s\n' "$name" "$size" "$refcount" "${users%,}"
    fi
done < "$modules"
