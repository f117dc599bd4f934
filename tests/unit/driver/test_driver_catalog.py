"""The branch catalog's corrections of issue 30 (item 8): the R570 and R580 rows say what
NVIDIA's pages say, and a GB200 is a Grace superchip for every rule a GH200 is one for."""
from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from gpuconf.driver import catalog

GH200, GB200, B200 = "0x2342", "0x2941", "0x2901"


def gpu(device: str) -> catalog.Gpu:
    return catalog.gpus([{"pci_address": "0000:09:01.0", "device_id": device}])[0]


def test_r570_and_r580_rows_say_what_nvidia_published():
    r570, r580 = catalog.catalog().get(570), catalog.catalog().get(580)
    assert r570 is not None and r570.eol == dt.date(2026, 2, 28)
    assert "not published" not in r570.source and "EOL February 2026" in r570.source
    assert r580 is not None and r580.eol == dt.date(2028, 6, 30)   # June (615/620 matrices), not August
    assert "August 2028" in r580.source


@pytest.mark.parametrize("device", [GH200, GB200])
def test_a_grace_superchip_is_open_only_and_named_as_such(device):
    found = gpu(device)
    assert found.grace and catalog.open_only(found)
    assert "Grace" in found.label
    for number in (580, 595):
        branch = catalog.catalog().get(number)
        assert branch is not None
        assert catalog.auto_flavour(branch, [found]) == "open"
        refusal = catalog.flavour_refusal(branch, "proprietary", [found])
        assert refusal is not None and "Grace" in refusal and "only the open kernel modules" in refusal


def test_gb200_is_blackwell_for_every_generation_rule():
    gb200, b200 = gpu(GB200), gpu(B200)
    assert (gb200.architecture, gb200.grace) == ("blackwell", True)
    assert (b200.architecture, b200.grace) == ("blackwell", False)
    r535 = catalog.catalog().get(535)
    assert r535 is not None and catalog.unsupported_gpus(r535, [gb200]) == [gb200]   # no Blackwell on 535


def test_a_device_tagged_with_an_unknown_generation_is_refused():
    data = catalog.catalog().model_dump()
    data["devices"] = {**data["devices"], "0x9999": "grace-rubin"}
    with pytest.raises(ValidationError, match="grace-rubin"):
        catalog.Catalog.model_validate(data)
