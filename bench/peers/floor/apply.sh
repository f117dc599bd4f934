# The apply floor (bench/floor_apply.py): what `gpuconf apply playbooks/a100-node.yml` changes on a
# fresh lab node, as one hand-written script. Run as root through `sudo -n sh -s` on one SSH session;
# SUBNET_MANAGER=1 on the fabric's subnet manager (opensm). The same apt-get transactions, apt-mark
# holds, file writes, modprobes and systemctl actions as gpuconf's `-v` output, in its order, with
# the reboot it takes (initramfs, nouveau, driver) moved to the end, as a script would do it: what
# must wait for the driver (fabric manager, DCGM, the CDI spec) is enabled here and starts at the boot.
set -eu
export DEBIAN_FRONTEND=noninteractive
APT="apt-get install -y -q -o DPkg::Lock::Timeout=120 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold --allow-downgrades"
HELD="$APT --allow-change-held-packages"
KERNEL=$(uname -r)
V=580.178.04-1
cat /proc/sys/kernel/random/boot_id

# nouveau
printf 'blacklist nouveau\noptions nouveau modeset=0\n' > /etc/modprobe.d/blacklist-nouveau.conf
update-initramfs -u -k "$KERNEL"
modprobe -r nouveau || true  # in use until the reboot, as gpuconf finds too

# nvidia_driver
$APT -- dkms
$HELD -- nvidia-kernel-common-580=$V nvidia-dkms-580-open=$V libnvidia-compute-580=$V nvidia-utils-580=$V
apt-mark hold nvidia-kernel-common-580 nvidia-dkms-580-open libnvidia-compute-580 nvidia-utils-580
modprobe nvidia || true      # after the reboot if nouveau holds the GPUs

# cuda
cat > /etc/apt/preferences.d/gpuconf-cuda.pref <<'EOF'
# Managed by gpuconf: CUDA is pinned to 13.0 (13.0.2-1).
Package: cuda-toolkit-13-0
Pin: version 13.0.2-1
Pin-Priority: 1001

Package: cuda cuda-toolkit cuda-toolkit-* cuda-[0-9]* cuda-drivers*
Pin: version *
Pin-Priority: -1
EOF
$HELD -- cuda-toolkit-13-0=13.0.2-1
apt-mark hold cuda-toolkit-13-0

# cuda_env
cat > /etc/profile.d/cuda.sh <<'EOF'
# Managed by gpuconf: CUDA 13.0 for login shells.
# Prepends only what is missing and never clobbers an existing value.
case ":${PATH}:" in
  *":/usr/local/cuda-13.0/bin:"*) ;;
  *) PATH="/usr/local/cuda-13.0/bin${PATH:+:${PATH}}" ;;
esac
case ":${LD_LIBRARY_PATH}:" in
  *":/usr/local/cuda-13.0/lib64:"*) ;;
  *) LD_LIBRARY_PATH="/usr/local/cuda-13.0/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}" ;;
esac
export PATH LD_LIBRARY_PATH
EOF
echo /usr/local/cuda-13.0/lib64 > /etc/ld.so.conf.d/cuda.conf

# persistence
$HELD -- nvidia-persistenced=$V
apt-mark hold nvidia-persistenced

# fabricmanager (the lab's A100 nodes have NVSwitches)
$HELD -- nvidia-fabricmanager-580=$V
apt-mark hold nvidia-fabricmanager-580
$HELD -- libnvidia-nscq-580=$V
apt-mark hold libnvidia-nscq-580
systemctl enable nvidia-fabricmanager   # starts at the reboot: it needs the driver loaded

# dcgm
$APT -- datacenter-gpu-manager-4-core=4.7.0-1 datacenter-gpu-manager-4-cuda13=4.7.0-1
systemctl enable nvidia-dcgm           # likewise

# opensm (the subnet manager only) and infiniband
for module in mlx5_ib ib_umad ib_uverbs rdma_ucm; do
  echo "$module" > "/etc/modules-load.d/$module.conf"
  lsmod | grep -q "^$module " || modprobe "$module"
done
if [ "${SUBNET_MANAGER:-0}" = 1 ]; then
  $APT -- opensm
fi

# container_toolkit
$APT -- docker.io
$HELD -- nvidia-container-toolkit=1.20.0-1
apt-mark hold nvidia-container-toolkit
mkdir -p /etc/docker
cat > /etc/docker/daemon.json <<'EOF'
{
    "default-runtime": "nvidia",
    "runtimes": {
        "nvidia": {
            "path": "nvidia-container-runtime",
            "args": []
        }
    }
}
EOF
echo NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/etc/cdi/nvidia.yaml >> /etc/nvidia-container-toolkit/nvidia-cdi-refresh.env
systemctl enable nvidia-cdi-refresh.service
systemctl enable nvidia-cdi-refresh.path
# nvidia-cdi-refresh.service writes /etc/cdi/nvidia.yaml at the reboot (gpuconf runs `nvidia-ctk cdi
# generate` after its reboot: the driver must be loaded)

# handlers
ldconfig
systemctl restart docker

# the reboot, detached so that this session ends cleanly first
nohup sh -c 'sleep 0.2; reboot' >/dev/null 2>&1 &
