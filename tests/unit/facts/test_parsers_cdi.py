"""The CDI spec and `nvidia-ctk cdi list` parsers, on real captures (tests/fixtures/real/nvidia-ctk)."""
from __future__ import annotations

import pytest

from gpuconf.facts.cdi import CdiListError, CdiSpecError, parse_cdi_list, parse_cdi_spec
from tests.real import read_real

SPEC = "nvidia-ctk/cdi-spec-575.64.03-toolkit-1.17.8-salilkadam.yaml"
LIST = "nvidia-ctk/cdi-list-5-devices-toolkit-1.14.0-docker-archive.txt"
CASES = (SPEC, LIST)


def test_a_real_spec_tells_the_driver_it_was_made_for():
    spec = parse_cdi_spec(read_real(SPEC))
    assert spec.driver_version == "575.64.03"
    assert (spec.cdi_version, spec.kind) == ("0.5.0", "nvidia.com/gpu")
    assert spec.devices == ("0", "GPU-520e01f2-cf30-6396-abef-e8e9a5233b0e", "all")
    assert spec.qualified("all") == "nvidia.com/gpu=all"


def test_a_real_list_gives_every_device_name():
    assert parse_cdi_list(read_real(LIST)) == ("nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=2",
                                               "nvidia.com/gpu=3", "nvidia.com/gpu=all")


def test_a_list_cut_short_is_not_taken_for_fewer_devices():
    cut = "\n".join(read_real(LIST).splitlines()[:-1])
    with pytest.raises(CdiListError, match="found 5 CDI devices but listed 4"):
        parse_cdi_list(cut)


def test_a_list_with_a_foreign_line_is_an_error():
    with pytest.raises(CdiListError, match="not a CDI device name"):
        parse_cdi_list("INFO[0000] Found 1 CDI devices\nError: open /etc/cdi: permission denied\n")


def test_an_empty_list_is_no_devices():
    assert parse_cdi_list("INFO[0000] Found 0 CDI devices\n") == ()


def test_a_spec_naming_two_drivers_is_refused_not_guessed():
    text = read_real(SPEC).replace("libnvidia-ml.so.575.64.03", "libnvidia-ml.so.580.95.05")
    with pytest.raises(CdiSpecError, match="several drivers .575.64.03, 580.95.05."):
        parse_cdi_spec(text)


def test_a_spec_without_driver_libraries_is_incomplete():
    text = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n  containerEdits:\n" \
           "    deviceNodes:\n    - path: /dev/nvidia0\n"
    with pytest.raises(CdiSpecError, match="names no versioned driver library"):
        parse_cdi_spec(text)


@pytest.mark.parametrize("text, message", [
    ("cdiVersion: [", "not YAML at line 1"),
    ("- a list\n", "not a mapping"),
    ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n", "incomplete CDI spec: no devices"),
    ("cdiVersion: 0.5.0\nkind: gpu\ndevices: []\n", "is not vendor/class"),
    ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [3]\n", "not a list of named devices"),
    ("", "not a mapping"),
])
def test_what_is_not_a_spec_says_why(text, message):
    with pytest.raises(CdiSpecError, match=message):
        parse_cdi_spec(text)


def test_the_version_is_read_from_the_hook_alone_when_no_library_is_mounted():
    text = ("cdiVersion: 0.7.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\ncontainerEdits:\n  hooks:\n"
            "  - hookName: createContainer\n    path: /usr/bin/nvidia-cdi-hook\n"
            "    args: [nvidia-cdi-hook, enable-cuda-compat, --host-driver-version=595.71.05]\n")
    assert parse_cdi_spec(text).driver_version == "595.71.05"
