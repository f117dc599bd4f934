"""Variable precedence, lowest to highest, through a real apply with `-c local`.

Layer k defines every variable v<k>..v9, so v<N> must come out as layer N's
value: each layer beats all the layers below it. The order is Ansible's (role params over
task vars, as ansible-core 2.19 gives them: docs/variables.md).
"""
import sys
from pathlib import Path
from textwrap import dedent

import yaml

from gpuconf.cli.main import main
from gpuconf.inventory.hosts import load_inventory

LAYERS = ["role-defaults", "all", "parent-group", "child-group", "host", "play", "task", "role-param", "extra"]


def values_from(layer: int) -> dict[str, str]:
    """What layer `layer` (1-based) sets: v<layer>..v9, all to its own name."""
    return {f"v{n}": LAYERS[layer - 1] for n in range(layer, len(LAYERS) + 1)}


def dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def build_project(root: Path) -> None:
    inventory = {"all": {
        "vars": values_from(2),
        "children": {"gpu": {
            "vars": values_from(3),
            "children": {"h100": {"vars": values_from(4), "hosts": {"node1": dict(values_from(5), python=sys.executable)}}},
        }},
    }}
    (root / "inv").mkdir()
    (root / "inv" / "hosts.yml").write_text(dump(inventory))
    role = root / "roles" / "probe"
    (role / "defaults").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "defaults" / "main.yml").write_text(dump(values_from(1)))
    content = "".join(f"v{n}={{{{ v{n} }}}}\n" for n in range(1, len(LAYERS) + 1)) + "r={{ r.msg }}\n"
    (role / "tasks" / "main.yml").write_text(dump([
        {"name": "register r", "assert": {"that": "true"}, "register": "r"},
        {"name": "write the values", "vars": dict(values_from(7), r="task"),
         "file": {"path": "{{ out }}/inside.txt", "content": content}},
    ]))
    play = {"hosts": "all", "gather_facts": False, "vars": dict(values_from(6), r="play"),
            "roles": [dict({"role": "probe"}, **values_from(8))],
            "tasks": [{"name": "outside the role", "file": {"path": "{{ out }}/outside.txt",
                                                            "content": "v1={{ v1 }} v8={{ v8 }}\n"}}]}
    (root / "site.yml").write_text(dump([play]))


def test_each_layer_beats_the_ones_below(tmp_path):
    build_project(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    code = main(["apply", str(tmp_path / "site.yml"), "-i", str(tmp_path / "inv"), "-c", "local",
                 "-e", f"out={out}", "-e", "v9=extra"])
    assert code == 0
    got = dict(line.split("=", 1) for line in (out / "inside.txt").read_text().splitlines())
    expected = {f"v{n}": layer for n, layer in enumerate(LAYERS, start=1)}
    assert got == dict(expected, r="All assertions passed")  # and a registered result beats task vars
    # role defaults are one play-wide layer (as in Ansible); role parameters are the role's own
    assert (out / "outside.txt").read_text() == "v1=role-defaults v8=play\n"


def test_groups_of_equal_depth_later_name_wins_and_depth_beats_name(tmp_path):
    (tmp_path / "hosts.yml").write_text(dedent("""\
        all:
          children:
            beta:
              vars: {tie: beta}
              hosts: {n1: }
            alpha:
              vars: {tie: alpha, deep: alpha}
              hosts: {n1: }
            zzz:
              vars: {deep: zzz-parent}
              children:
                aaa:
                  vars: {deep: aaa-child}
                  hosts: {n1: }
    """))
    inv = load_inventory(str(tmp_path / "hosts.yml"))
    assert inv.host_vars("n1")["tie"] == "beta"      # written first, but 'beta' sorts after 'alpha'
    assert inv.host_vars("n1")["deep"] == "aaa-child"  # a child group beats any shallower group
