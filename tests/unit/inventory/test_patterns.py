"""`hosts:` and `--limit` patterns, with Ansible's grammar."""
import pytest

from gpuconf.errors import InventoryError
from gpuconf.inventory.hosts import Inventory
from gpuconf.inventory.patterns import limit_hosts, match_hosts, narrow


@pytest.fixture(scope="module")
def inv():
    inventory = Inventory("test-inventory")
    inventory.add_group("gpu")
    inventory.add_group("h100", parent="gpu")
    inventory.add_group("a100", parent="gpu")
    inventory.add_group("rack1")
    for name, group in [("gpu-01", "h100"), ("gpu-02", "h100"), ("gpu-03", "a100"), ("cpu-01", "ungrouped")]:
        inventory.add_host(name, group)
    inventory.add_host("gpu-01", "rack1")
    inventory.add_host("gpu-03", "rack1")
    inventory.finish()
    return inventory


# Each result is ansible-core 2.19.14's (InventoryManager.get_hosts) on the same inventory, written
# as YAML: a group's own hosts, then its child groups' level by level (`ungrouped` is all's first
# child); unions in the order written.
@pytest.mark.parametrize("pattern, expected", [
    ("all", ["cpu-01", "gpu-01", "gpu-03", "gpu-02"]),
    ("gpu", ["gpu-01", "gpu-02", "gpu-03"]),            # a parent group includes its children's hosts
    ("a100", ["gpu-03"]),
    ("cpu-01", ["cpu-01"]),
    ("gpu-0*", ["gpu-01", "gpu-02", "gpu-03"]),
    ("?100", ["gpu-01", "gpu-02", "gpu-03"]),            # globs match group names too
    ("gpu-0[12]", []),                                   # a subscript: the 13th host of `gpu-0`
    ("a100,cpu-01", ["gpu-03", "cpu-01"]),
    ("a100:cpu-01", ["gpu-03", "cpu-01"]),
    ("gpu:&rack1", ["gpu-01", "gpu-03"]),
    ("gpu,&rack1,!a100", ["gpu-01"]),
    ("!gpu", ["cpu-01"]),                                # exclusion alone starts from all
    ("!rack1:gpu", ["gpu-02"]),                          # order of terms does not matter
    ("~^gpu-0[23]$", ["gpu-02", "gpu-03"]),
    ("~gpu", ["gpu-01", "gpu-02", "gpu-03"]),
    ("~pu", []),                                         # a regex matches from the start
    ("cpu-01,gpu-01", ["cpu-01", "gpu-01"]),             # unions in the order written
    ("rack1:gpu", ["gpu-01", "gpu-03", "gpu-02"]),
    ("gpu[0]", ["gpu-01"]),
    ("gpu[-1]", ["gpu-03"]),
    ("gpu[1:]", ["gpu-02", "gpu-03"]),
    ("gpu[0:1]:a100", ["gpu-01", "gpu-02", "gpu-03"]),
    ("gpu[1:0]", ["gpu-02"]),
    ("all[1:2],cpu-01", ["gpu-01", "gpu-03", "cpu-01"]),
    ("ungrouped", ["cpu-01"]),
    ("nothing-here", []),
])
def test_match(inv, pattern, expected):
    assert match_hosts(inv, pattern) == expected


def test_a_subscript_past_the_hosts_is_an_error(inv):
    with pytest.raises(InventoryError, match="no host matched the subscripted pattern 'gpu\\[5\\]'"):
        match_hosts(inv, "gpu[5]")


def test_retry_file(inv, tmp_path):
    retry = tmp_path / "site.retry"
    retry.write_text("gpu-02\n\ncpu-01\nno-such-host\n")
    assert match_hosts(inv, f"@{retry}") == ["gpu-02", "cpu-01"]
    assert match_hosts(inv, f"@{retry}:!cpu-01") == ["gpu-02"]


def test_unreadable_retry_file_is_an_error(inv, tmp_path):
    with pytest.raises(InventoryError, match="cannot read limit file"):
        match_hosts(inv, f"@{tmp_path / 'missing.retry'}")


def test_bad_regex_is_an_error(inv):
    with pytest.raises(InventoryError, match="regular expression"):
        match_hosts(inv, "~gpu-(")


def test_limit_narrows_the_play_hosts(inv):
    assert limit_hosts(inv, ["gpu-01", "gpu-02", "gpu-03"], "rack1") == ["gpu-01", "gpu-03"]
    assert limit_hosts(inv, ["gpu-01", "cpu-01"], None) == ["gpu-01", "cpu-01"]


@pytest.mark.parametrize("limit, hint", [("gpu-1", "gpu-01"), ("h10", "h100"), ("rack1:&a10", "a100")])
def test_limit_matching_nothing_is_an_error_with_a_hint(inv, limit, hint):
    with pytest.raises(InventoryError) as err:
        limit_hosts(inv, list(inv.hosts), limit)
    assert f"--limit '{limit}' matches no hosts" in str(err.value)
    assert f"did you mean '{hint}'" in str(err.value)


def test_empty_intersection_of_real_groups_gives_no_misleading_hint(inv):
    with pytest.raises(InventoryError) as err:
        limit_hosts(inv, list(inv.hosts), "a100:&h100")
    assert "matches no hosts" in str(err.value) and "did you mean" not in str(err.value)


def test_narrow_applies_the_limit_once_for_every_pattern_and_keeps_the_groups(inv):
    narrowed = narrow(inv, "rack1:!a100")
    assert match_hosts(narrowed, "all") == ["gpu-01"]
    assert match_hosts(narrowed, "gpu:!h100") == []            # a play's own pattern, within the limit
    assert match_hosts(narrow(narrowed, "gpu-0*"), "all") == ["gpu-01"]  # a narrower scope never widens
    # `groups` and `hostvars` still see every host, as Ansible's do under --limit
    assert narrowed.group_members("gpu") == ["gpu-01", "gpu-02", "gpu-03"] and len(narrowed.hosts) == 4
    assert match_hosts(inv, "all") == ["cpu-01", "gpu-01", "gpu-03", "gpu-02"]  # the inventory itself is untouched
    assert narrow(inv, None) is inv
    with pytest.raises(InventoryError, match="--limit 'rack9' matches no hosts"):
        narrow(inv, "rack9")
