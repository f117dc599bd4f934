"""A 10,000-host inventory with group_vars: load it, resolve every host's variables, plan a play.

    .venv/bin/python bench/big_inventory.py [--hosts 10000] [--profile]

The inventory is generated into a temporary directory, in the shape of a large GPU fleet:
100 racks of 100 A100 nodes under `a100`, a `subnet_managers` group across racks, inline host
variables (address), `group_vars/` for all, a100 and every rack, and `host_vars/` for 1 host in
100. The play is `playbooks/a100-node.yml` (its 10 roles, 37 tasks and 2 handlers).

Timed (wall clock, best of --repeat; --cpu for this process's CPU time, which other load on
the machine disturbs less), each on its own, in this process (imports are not counted; they are the same for any
inventory size and are measured by `gpuconf --version` in the main table):
  load      load_inventory(): YAML, group_vars, host_vars, group depths
  resolve   inventory.host_vars(host) for every host (the merged variables)
  plan      the playbook loaded, the play's hosts matched, and for every host what its run does
            before the first round trip (`HostPlanner.facts_of(tasks, speculative=True)`): every
            task's `when` and parameters rendered with the host's variables, facts standing in as
            unknowable, its parameter model built, and the facts its check will read collected
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RACK_SIZE = 100


def generate(directory: Path, hosts: int) -> None:
    racks = max(1, hosts // RACK_SIZE)
    lines = ["all:", "  vars:", "    port: 2222", "    user: gpuadmin", "    become: true", "  children:",
             "    a100:", "      vars:", "        gpu_profile: hgx-a100", "      children:"]
    names = []
    for rack in range(racks):
        lines += [f"        rack{rack:03d}:", "          hosts:"]
        for slot in range(min(RACK_SIZE, hosts - rack * RACK_SIZE)):
            index = rack * RACK_SIZE + slot
            name = f"gpu{index:05d}"
            names.append(name)
            lines.append(f"            {name}: {{address: 10.{index // 65536}.{index // 256 % 256}.{index % 256}}}")
    lines += ["    subnet_managers:", "      hosts:"]
    lines += [f"        {name}:" for name in names[::1000]]
    (directory / "hosts.yml").write_text("\n".join(lines) + "\n")
    group_vars = directory / "group_vars"
    group_vars.mkdir()
    (group_vars / "all.yml").write_text("connect_timeout: 10\nntp_servers: [10.0.0.1, 10.0.0.2]\n"
                                        "site: {name: dc1, region: eu-west}\n")
    (group_vars / "a100.yml").write_text("nvidia_driver_branch: 580\nnvidia_driver_version: '580.95.05'\n"
                                         "cuda_version: '13.0'\ncuda_package_version: '13.0.2-1'\n")
    (group_vars / "subnet_managers.yml").write_text("infiniband_subnet_manager: true\n")
    for rack in range(racks):
        (group_vars / f"rack{rack:03d}.yml").write_text(
            f"rack: {rack}\npdu: pdu-{rack:03d}\ninfiniband_port_rate: '200 Gb/sec'\nswitch: leaf{rack // 4:02d}\n")
    host_vars = directory / "host_vars"
    host_vars.mkdir()
    for name in names[::100]:
        (host_vars / f"{name}.yml").write_text("infiniband_port_wait: 120\nnotes: replaced GPU 3\n")


def plan(inventory, playbook) -> int:
    """Plan every play on every host; returns the number of fact requests planned."""
    from gpuconf.engine.options import RunOptions, task_selected
    from gpuconf.engine.planner import HostPlanner
    from gpuconf.engine.runner import Runner
    from gpuconf.engine.variables import magic_variables

    options = RunOptions()
    runner = Runner(inventory, playbook, options)
    planned = 0
    for play in playbook.plays:
        tasks = [t for t in play.tasks if task_selected(t, options.tags, options.skip_tags)]
        for host in runner.play_hosts(play):
            magic = magic_variables(inventory, host, runner.play_hosts(play), options.check_mode, None, runner.shared)
            on_host = HostPlanner(play, host, inventory.host_vars(host), magic, options, {}, plan_cache=runner.plan_cache)
            # exactly what a host's run does before its first round trip: every task rendered with
            # facts unknowable, and the facts of those that do not depend on facts collected
            planned += len(on_host.facts_of(tasks, speculative=True))
    return planned


def measure(hosts: int, cpu: bool = False) -> dict:
    from gpuconf.inventory.hosts import load_inventory
    from gpuconf.playbook.loader import load_playbook

    with tempfile.TemporaryDirectory(prefix="gpuconf-10k-") as temp:
        directory = Path(temp)
        generate(directory, hosts)
        clock = time.process_time if cpu else time.perf_counter
        started = clock()
        inventory = load_inventory(str(directory))
        loaded = clock()
        for host in inventory.hosts:
            inventory.host_vars(host)
        resolved = clock()
        playbook = load_playbook(ROOT / "playbooks" / "a100-node.yml", ROOT)
        tasks = plan(inventory, playbook)
        planned = clock()
    return {"hosts": len(inventory.hosts), "groups": len(inventory.groups), "fact_requests": tasks,
            "load_s": loaded - started, "resolve_s": resolved - loaded, "plan_s": planned - resolved,
            "total_s": planned - started}


def warm_imports() -> None:
    import gpuconf.engine.runner  # noqa: F401
    import gpuconf.inventory.hosts  # noqa: F401
    import gpuconf.playbook.loader  # noqa: F401
    import gpuconf.tasks.registry  # noqa: F401


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="CPU time of this process instead of wall time")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the run, by cumulative time")
    args = parser.parse_args()
    warm_imports()
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        result = measure(args.hosts)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    else:
        result = min((measure(args.hosts, args.cpu) for _ in range(args.repeat)), key=lambda r: r["total_s"])
    print(f"{result['hosts']} hosts, {result['groups']} groups, {result['fact_requests']} fact requests planned: "
          f"load {result['load_s']:.2f}s, resolve {result['resolve_s']:.2f}s, plan {result['plan_s']:.2f}s, "
          f"total {result['total_s']:.2f}s ({'CPU' if args.cpu else 'wall'}, best of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
