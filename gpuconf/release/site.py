"""The files of a new site (`gpuconf init DIR`): an inventory with a group per GPU model and its
group_vars, a gpuconf.cfg, playbooks that import the shipped ones, and a README of next steps.

The pinned versions in the group_vars are the shipped roles' defaults at the time of `init`, read
from the roles themselves, so a new site starts where the library stands and then keeps its own
pins (a later gpuconf with newer defaults changes no site's pins).
"""
from __future__ import annotations

from dataclasses import dataclass

from gpuconf import __version__
from gpuconf.files import yamlsrc
from gpuconf.files.values import JSONValue
from gpuconf.release.library import shipped_roles


@dataclass(frozen=True)
class Model:
    """A GPU model: its inventory group, the shipped playbook for it and what its fabric is."""

    group: str
    playbook: str
    title: str
    fabric: str  # the group_vars lines that describe the fabric (YAML, with comments)


MODELS = (
    Model("a100", "a100-node.yml", "HGX A100: 8x A100-SXM4, NVSwitch, ConnectX-6 HDR InfiniBand",
          "# NVSwitch: fabric manager at the driver's version (the fabricmanager role reads the board).\n"
          "# InfiniBand: ports ACTIVE once a subnet manager runs on the fabric; one host per fabric runs\n"
          "# opensm (put it in the subnet_managers group).\n"
          "infiniband_expect_subnet_manager: true\n"
          "infiniband_port_rate: null          # e.g. 200 (HDR): a port below it is drift\n"),
    Model("h100", "h100-node.yml", "HGX H100: 8x H100 80GB HBM3, NVSwitch, ConnectX-7 NDR InfiniBand",
          "# NVSwitch: fabric manager at the driver's version (the fabricmanager role reads the board).\n"
          "# InfiniBand: ports ACTIVE once a subnet manager runs on the fabric; one host per fabric runs\n"
          "# opensm (put it in the subnet_managers group).\n"
          "infiniband_expect_subnet_manager: true\n"
          "infiniband_port_rate: null          # e.g. 400 (NDR): a port below it is drift\n"),
    Model("b200", "b200-node.yml", "HGX B200: 8x B200, NVLink5 switches, ConnectX-7 NDR",
          "# NVLink5: fabric manager with nvlsm, libnvsdm and ib_umad, at the driver's version (the\n"
          "# fabricmanager role reads the board). Blackwell runs the open kernel modules only.\n"),
    Model("gb200", "gb200-node.yml", "GB200 NVL72 compute tray: 4x GB200, the rack's NVLink switch trays",
          "# The rack routes the NVLink fabric (no fabric manager on the tray); IMEX joins the trays\n"
          "# of one rack: its peers are this inventory group's hosts (one group per NVL72 rack).\n"
          "imex_domain_group: gb200\n"),
    Model("t4", "t4-inference.yml", "T4 inference: one PCIe GPU, no NVSwitch, no InfiniBand",
          "# No NVLink fabric and no InfiniBand.\n"),
)


def role_default(role: str, name: str) -> JSONValue:
    defaults = shipped_roles() / role / "defaults" / "main.yml"
    data: dict[str, JSONValue] = yamlsrc.plain(yamlsrc.load_file(defaults) or {})
    return data[name]


def _quoted(value: JSONValue) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def group_vars(model: Model) -> str:
    branch, version = role_default("nvidia_driver", "nvidia_driver_branch"), \
        role_default("nvidia_driver", "nvidia_driver_version")
    flavour = role_default("nvidia_driver", "nvidia_driver_flavour")
    cuda, cuda_package = role_default("cuda", "cuda_version"), role_default("cuda", "cuda_package_version")
    return (f"# {model.title}. Checked and converged by playbooks/{model.group}.yml (the shipped {model.playbook});\n"
            f"# `gpuconf roles ROLE` documents every variable.\n\n"
            f"# The driver: one branch at an exact version (`gpuconf catalog`: branches and their end of life).\n"
            f"nvidia_driver_branch: {branch}\n"
            f"nvidia_driver_version: {_quoted(version)}\n"
            f"nvidia_driver_flavour: {flavour}             # auto (the catalog's choice for the GPU), open or "
            f"proprietary\n\n"
            f"# CUDA: one toolkit at an exact version, held (CUDA 13 needs driver 580 or newer).\n"
            f"cuda_version: {_quoted(cuda)}\n"
            f"cuda_package_version: {_quoted(cuda_package)}\n\n"
            f"{model.fabric}\n"
            f"# What the drift timer on each node checks (gpuconf-agent.yml installs the agent and the timer).\n"
            f"drift_timer_playbook: {model.playbook}\n")


def hosts_yml() -> str:
    groups = "".join(f"    {m.group}:          # {m.title}\n      hosts: {{}}\n" for m in MODELS)
    return ("# The site's hosts, each in the group of its GPU model (group_vars/<model>.yml pins its stack).\n"
            "# A host line gives its address when the name does not resolve:\n"
            "#       node01: {address: 10.0.0.11}\n"
            "all:\n"
            "  children:\n"
            f"{groups}"
            "    subnet_managers:   # the host of each InfiniBand fabric that runs opensm\n"
            "      hosts: {}\n"
            "      vars:\n"
            "        infiniband_subnet_manager: true\n"
            "    slurm_controller:  # the host whose slurm.conf names gpuconf's Prolog, Epilog and health check\n"
            "      hosts: {}\n")


ALL_VARS = """# Every host: how gpuconf reaches it (README of gpuconf: Inventories).
user: root                  # or an admin user with passwordless sudo, and become: true
become: false
# ssh_key: ~/.ssh/gpuconf
# jump_host: ops@bastion.example.com:22
# known_hosts_file: known_hosts   # host keys are checked strictly (--accept-new-host-keys: trust on first use)
"""

CONFIG = """# gpuconf's project configuration (what ansible.cfg is to Ansible): gpuconf reads it from this
# directory. Command-line options and GPUCONF_* variables override it.
[defaults]
inventory = inventories/prod
forks = 50
accept_new_host_keys = false
"""


def site_playbook() -> str:
    imports = "".join(f"- import_playbook: {m.group}.yml\n" for m in MODELS)
    return "# Every GPU model of the site: `gpuconf check playbooks/site.yml`.\n" + imports


def model_playbook(model: Model) -> str:
    return (f"# {model.title}: the playbook shipped with gpuconf, with this site's group_vars\n"
            f"# (inventories/prod/group_vars/{model.group}.yml). Add the site's own plays below it.\n"
            f"- import_playbook: {model.playbook}\n")


def readme() -> str:
    groups = ", ".join(m.group for m in MODELS)
    return f"""# A gpuconf site

Written by `gpuconf init` (gpuconf {__version__}). The roles and playbooks come with gpuconf
(`gpuconf roles` lists them); this directory holds what is the site's own: its hosts, its pinned
versions and its playbooks. Keep it in git. Run every command from here (gpuconf.cfg names the
inventory).

## Next steps

1. **Hosts.** Put each host in `inventories/prod/hosts.yml` under the group of its GPU model
   ({groups}). Name the Slurm controller under `slurm_controller`, and the host that runs each
   InfiniBand fabric's subnet manager under `subnet_managers`. Groups nobody uses can stay empty.
2. **Access.** Say in `inventories/prod/group_vars/all.yml` how gpuconf reaches the hosts (user,
   sudo, key, bastion). Then `gpuconf inventory --graph` shows the groups and
   `gpuconf run all -a uptime` reaches every host.
3. **Pins.** Each `inventories/prod/group_vars/<model>.yml` pins the driver branch and version,
   the kernel module flavour, CUDA and the fabric. `gpuconf catalog` lists the driver branches.
4. **Drift.** `gpuconf check playbooks/site.yml` (or `playbooks/<model>.yml`) reports what
   differs and changes nothing; `gpuconf check playbooks/site.yml --diff` shows the details.
5. **Converge.** `gpuconf apply playbooks/site.yml` (a host that needs a reboot for its driver
   is rebooted once; `--limit` takes a few hosts first).
6. **The nodes' own half.** `gpuconf apply gpuconf-agent.yml` installs this gpuconf on every
   node (no package index needed there): the pre-job gate as Slurm's Prolog and Epilog, the
   Slurm health check and the drift timer, and on the Slurm controller an include file naming
   them. Run it again after upgrading gpuconf here: `gpuconf check gpuconf-agent.yml` reports
   every node whose agent is behind.
7. **Keep it running.** `gpuconf remediate playbooks/site.yml --max-unavailable 5%` drains,
   converges, verifies and resumes drifted or unhealthy Slurm nodes in waves.
"""


def site_files() -> dict[str, str]:
    """Relative path -> text of every file `gpuconf init` writes."""
    files = {"gpuconf.cfg": CONFIG, "README.md": readme(), "inventories/prod/hosts.yml": hosts_yml(),
             "inventories/prod/group_vars/all.yml": ALL_VARS, "playbooks/site.yml": site_playbook()}
    for model in MODELS:
        files[f"inventories/prod/group_vars/{model.group}.yml"] = group_vars(model)
        files[f"playbooks/{model.group}.yml"] = model_playbook(model)
    return files
