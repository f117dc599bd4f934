"""The simulated `nvidia-ctk cdi generate` and `cdi list` (lab/gpuconf_lab/sim/nvctk_cdi.py), read
back with gpuconf's own parsers: the spec names the loaded driver's libraries in the real format."""
from __future__ import annotations

from gpuconf.facts.cdi import parse_cdi_list, parse_cdi_spec

SPEC = "/etc/cdi/nvidia.yaml"


def generate(node):
    return node.tool("/usr/bin/nvidia-ctk", "cdi", "generate", f"--output={SPEC}")


def listed(node) -> tuple[str, ...]:
    done = node.tool("/usr/bin/nvidia-ctk", "cdi", "list")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("INFO[0000] Found ")      # logrus logs to stderr, the names go to stdout
    return parse_cdi_list(done.stderr + done.stdout)


def test_generate_names_the_loaded_driver_and_list_resolves_all(make_node):
    node = make_node("a100", driver="580.95.05")
    node.install("nvidia-container-toolkit", "1.20.0")
    node.install("libnvidia-compute-580", "580.95.05")
    done = generate(node)
    assert done.returncode == 0, done.stderr
    assert "INFO[0000] Using /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05\n" in done.stderr
    assert done.stderr.endswith("INFO[0000] Generated CDI spec with version 0.7.0\n")
    spec = parse_cdi_spec(node.read(SPEC))
    assert (spec.driver_version, spec.kind) == ("580.95.05", "nvidia.com/gpu")
    assert len(spec.devices) == 17 and spec.devices[:2] == ("0", "1") and spec.devices[-1] == "all"
    assert "    hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05\n" in node.read(SPEC)
    names = listed(node)
    assert "nvidia.com/gpu=all" in names and len(names) == 17


def test_after_a_driver_switch_the_old_spec_is_stale_until_generated_again(make_node):
    node = make_node("a100", driver="580.95.05")
    node.install("nvidia-container-toolkit", "1.17.8")
    assert generate(node).returncode == 0
    assert parse_cdi_spec(node.read(SPEC)).cdi_version == "0.5.0"     # the 1.17.8 capture's version
    node.install_driver("595.71.05", open_modules=True)
    node.boot()
    assert parse_cdi_spec(node.read(SPEC)).driver_version == "580.95.05"     # stale: what cdi_spec finds
    # the sandbox unpacks files but keeps the old soname link: NVML is still 580 against a 595 kernel
    done = generate(node)
    assert done.returncode == 1 and "ERROR_LIB_RM_VERSION_MISMATCH" in done.stderr
    node.path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").unlink()       # what dpkg's unpack does
    node.install("nvidia-utils", "595.71.05")
    assert generate(node).returncode == 0
    assert parse_cdi_spec(node.read(SPEC)).driver_version == "595.71.05"


def test_without_a_loaded_driver_generate_fails_and_list_finds_nothing(make_node):
    node = make_node("a100")
    node.install("nvidia-container-toolkit", "1.20.0")
    node.install_driver("580.95.05", open_modules=True)      # installed, not loaded: no reboot yet
    done = generate(node)
    assert done.returncode == 1 and "ERROR_DRIVER_NOT_LOADED" in done.stderr
    from gpuconf.facts.cdi import parse_cdi_generate_log  # the real tool's log format, read by gpuconf's parser
    log = parse_cdi_generate_log(done.stderr)
    assert not log.generated and log.errors and log.errors[-1].startswith("failed to generate CDI spec")
    assert not node.path(SPEC).exists()
    assert listed(node) == ()
