#!/bin/sh
# The main job on the embedded default: a simulated fleet of 4 A100 nodes.
# Up, check (drift: exit 2), apply (converge, reboot included), check (in sync: 0), down.
set -u
cd "$(dirname "$0")/.."
GPUCONF=.venv/bin/gpuconf
NAME=${GPUCONF_DEMO_LAB:-demo}   # another name keeps a second demo on this machine apart
$GPUCONF lab down --name "$NAME" >/dev/null 2>&1
trap '$GPUCONF lab down --name "$NAME" >/dev/null 2>&1' EXIT INT TERM
step() { printf '\n=== %s\n' "$*"; }
expect() {  # expect CODE COMMAND...: run, and fail the demo if the exit code differs
  want=$1; shift
  "$@"; got=$?
  if [ "$got" -ne "$want" ]; then echo "demo: '$*' exited $got, expected $want" >&2; exit 1; fi
}
step "gpuconf lab up --name $NAME --nodes 4 --profile a100"
expect 0 $GPUCONF lab up --name "$NAME" --nodes 4 --profile a100
step "gpuconf check playbooks/a100-node.yml -i $NAME   (fresh cloud images: drift, exit 2)"
expect 2 $GPUCONF check playbooks/a100-node.yml -i "$NAME"
step "gpuconf apply playbooks/a100-node.yml -i $NAME   (converge, including the reboot)"
expect 0 $GPUCONF apply playbooks/a100-node.yml -i "$NAME"
step "gpuconf check playbooks/a100-node.yml -i $NAME   (in sync, exit 0)"
expect 0 $GPUCONF check playbooks/a100-node.yml -i "$NAME"
step "gpuconf lab down --name $NAME"
