#!/bin/sh
# Debian packages that the tests, the demo and the lab need. Installs only what
# is missing, so a second run costs a few dpkg-query calls. The second line is for EL 9 lab
# nodes, which run the real rpm and dnf (rpmbuild and createrepo_c build their repository). The third
# is for the report tests: a headless Chromium opens the HTML fleet report, promtool checks the textfile.
# The fourth is the lab's real Slurm cluster: slurmctld and munged for the lab, slurmd in every node.
set -eu
PACKAGES="openssh-server openssh-client sudo dpkg-dev fakeroot cpio iproute2 procps psmisc util-linux python3 python3-venv
rpm dnf dnf-plugins-core createrepo-c
chromium prometheus
slurmctld slurmd slurm-client munge"
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "system-deps: missing Debian packages:$missing (run as root, or install them)" >&2
  exit 1
fi
echo "system-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
