"""Fuzz inputs: a small valid project, and hypothesis strategies that mutate it.

A case is a whole project on disk (playbook, role files, inventory, group and
host variables, a vars file, an `-e @file`) in which one or more files were
mutated, at the text level (lines deleted, swapped, re-indented, tokens
inserted, values and keys replaced, truncated) or the tree level (a node
replaced by random YAML), or replaced outright by random YAML, text or bytes.

The connection settings live in a file that is never mutated, and no mutation
may mention a connection variable: every case is planned, but connects only to
a closed port on 127.0.0.1 (or to nothing), and never runs locally.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field

import yaml
from hypothesis import strategies as st

SITE = """\
- name: converge
  hosts: gpu
  serial: [1, "50%"]
  max_fail_percentage: 20
  vars:
    driver_branch: 535
    motd: "hello {{ inventory_hostname }}"
  vars_files:
    - vars/extra.yml
  roles:
    - base
    - role: base
      greeting: hi
  tasks:
    - name: a file
      file:
        path: "/etc/gpuconf-fuzz/{{ inventory_hostname }}.conf"
        content: "{{ motd }}\\n"
        mode: "0644"
        backup: true
      notify: restart thing
      tags: [files]
    - name: a line
      line: {path: /etc/gpuconf-fuzz/limits, line: "memlock=unlimited", regexp: "^memlock="}
      when: facts.gpu_count > 0
    - name: a package
      package: {name: "nvidia-driver-{{ driver_branch }}", lock_timeout: 5, hold: true}
    - name: a command
      command: {cmd: ["echo", "{{ greeting | default('x') }}"], creates: /etc/gpuconf-fuzz/done}
      register: echoed
      timeout: 5
    - name: uses it
      assert: {that: ["echoed.status != 'failed'"]}
  handlers:
    - name: restart thing
      service: {name: nvidia-persistenced, state: restarted}
- name: second play
  hosts: "all:!node3"
  gather_facts: false
  tasks:
    - probe: {command: "true", timeout: 3}
    - json_merge: {path: /etc/gpuconf-fuzz/daemon.json, merge: {a: 1}}
"""

ROLE_TASKS = """\
- name: role file
  file:
    path: /etc/gpuconf-fuzz/role.conf
    template: role.conf.j2
- name: module
  kernel_module: {name: nvidia_peermem, state: present}
  ignore_errors: true
- name: directory
  directory: {path: /etc/gpuconf-fuzz/d, mode: "0755"}
"""

ROLE_DEFAULTS = """\
greeting: hello
secret_vars: [token]
token: !secret s3cr3t-value
"""

ROLE_HANDLERS = """\
- name: reload role
  listen: restart thing
  command: {cmd: "true"}
"""

ROLE_META = """\
dependencies: []
"""

ROLE_TEMPLATE = "greeting={{ greeting }}\n{% if facts.gpu_count > 0 %}gpus={{ facts.gpu_count }}{% endif %}\n"

HOSTS = """\
all:
  children:
    gpu:
      hosts:
        node1: {rack: r1}
        node2:
      vars:
        cluster: a
    other:
      hosts:
        node3:
"""

GROUP_VARS = """\
driver_branch: 550
packages: [dkms, opensm]
"""

HOST_VARS = """\
rack: r9
motd: "host {{ rack }}"
"""

VARS_FILE = """\
extra_setting: true
limits: {memlock: unlimited}
"""

EXTRA_VARS = """\
driver_branch: 535
"""

# path -> text: the files a case may mutate
SEED: dict[str, str] = {
    "site.yml": SITE,
    "roles/base/tasks/main.yml": ROLE_TASKS,
    "roles/base/defaults/main.yml": ROLE_DEFAULTS,
    "roles/base/handlers/main.yml": ROLE_HANDLERS,
    "roles/base/meta/main.yml": ROLE_META,
    "roles/base/templates/role.conf.j2": ROLE_TEMPLATE,
    "inventory/hosts.yml": HOSTS,
    "inventory/group_vars/gpu.yml": GROUP_VARS,
    "inventory/host_vars/node1.yml": HOST_VARS,
    "vars/extra.yml": VARS_FILE,
    "extra.yml": EXTRA_VARS,
}

CONNECTION_FILE = "inventory/group_vars/all/connection.yml"
# Never in a mutation: any of these could make a case reach a real host or run locally.
FORBIDDEN = ("connection", "address", "ansible_", "jump_host", "proxy_command", "python", "known_hosts",
             "ssh_config")

TOKENS = [":", ": ", "- ", "-", "{", "}", "[", "]", ",", "\"", "'", "#", "&a ", "*a", "<<: *a", "!secret ",
          "!!python/object:os.system ", "!!binary ", "%", "@", "`", "|", ">", "? ", "\t", "\n", "  ", "{{", "}}",
          "{{ undefined_var }}", "{{ 1/0 }}", "{% if %}", "{% endif %}", "{{ facts.nope.deeper }}", "\\", "\x00",
          "\u00e9", "\ufeff", "~", "null", "---\n", "...\n", "=", "$(touch /tmp/gpuconf-fuzz-pwned)", ";"]
VALUES = ["~", "null", "0", "-1", "1e309", ".nan", ".inf", "true", "yes", "no", "''", '""', "[]", "{}",
          "[1, [2, [3]]]", "{a: {b: {c: d}}}", "0644", "644", "'0o777'", "70000", "x" * 300, "'{{ undefined }}'",
          "'{{ 8 }}'", "'{{ [1,2] }}'", "'{{ {\"a\": 1} }}'", "'{{ lookup(\"x\") }}'", "'{{ \"a\" ~ }}'",
          "'{{ range(10**9) | list }}'", "'{{ facts }}'", "'{{ hostvars }}'", "'{{ groups.all }}'", "'*'",
          "'!node1'", "'~['", "'@/nonexistent'", "'100%'", "'0%'", "'150%'", "'-5'", "2.5", "'a b'",
          "/etc/../etc/x", "relative/path", "'/etc/$(id)'", "'nvidia driver'", "'pkg;rm -rf /'", "!secret x",
          "&anchor 1", "*undefined_alias", "2001-01-01", "0x1F", "0o17", "'\u2603'"]
KEYWORDS = ["name", "hosts", "tasks", "roles", "vars", "vars_files", "handlers", "serial", "max_fail_percentage",
            "gather_facts", "become", "tags", "when", "notify", "register", "ignore_errors", "timeout", "no_log",
            "listen", "file", "fiel", "line", "package", "pakage", "service", "command", "probe", "reboot", "assert",
            "kernel_module", "directory", "json_merge", "path", "content", "contnet", "mode", "state", "backup",
            "template", "src", "cmd", "creates", "lock_timeout", "version", "hold", "role", "dependencies", "all",
            "children", "hosts", "vars", "chidlren", "node1", "gpu", "secret_vars", "port", "user", "become",
            "connect_timeout", "connect_retries", "ssh_key", "dependencies", "that", "merge", "taks", "nmae"]


@dataclass
class Case:
    """One fuzz input: the project's files and how the CLI is called."""

    files: dict[str, bytes]
    limit: str | None = None
    extra: list[str] = field(default_factory=list)
    mutations: list[str] = field(default_factory=list)


def safe(text: str) -> bool:
    return not any(word in text for word in FORBIDDEN)


# -- text mutations -------------------------------------------------------------------------------

@st.composite
def line_mutation(draw, text: str) -> tuple[str, str]:
    lines = text.split("\n")
    i = draw(st.integers(0, max(0, len(lines) - 1)))
    kind = draw(st.sampled_from(["delete", "duplicate", "swap", "indent", "dedent"]))
    if kind == "delete" and lines:
        del lines[i]
    elif kind == "duplicate" and lines:
        lines.insert(i, lines[i])
    elif kind == "swap" and len(lines) > 1:
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "indent" and lines:
        lines[i] = " " * draw(st.integers(1, 4)) + lines[i]
    elif kind == "dedent" and lines:
        lines[i] = lines[i][draw(st.integers(1, 4)):]
    return "\n".join(lines), f"{kind} line {i + 1}"


@st.composite
def token_mutation(draw, text: str) -> tuple[str, str]:
    at = draw(st.integers(0, len(text)))
    token = draw(st.sampled_from(TOKENS) | st.text(string.printable, min_size=1, max_size=4))
    return text[:at] + token + text[at:], f"insert {token!r} at {at}"


@st.composite
def value_mutation(draw, text: str) -> tuple[str, str]:
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if ": " in line]
    if not candidates:
        return text, "no value to replace"
    i = draw(st.sampled_from(candidates))
    key, _, _ = lines[i].partition(": ")
    value = draw(st.sampled_from(VALUES))
    lines[i] = f"{key}: {value}"
    return "\n".join(lines), f"line {i + 1} value -> {value!r}"


@st.composite
def key_mutation(draw, text: str) -> tuple[str, str]:
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if ":" in line]
    if not candidates:
        return text, "no key to replace"
    i = draw(st.sampled_from(candidates))
    key, sep, rest = lines[i].partition(":")
    indent = key[: len(key) - len(key.lstrip(" -"))]
    new = draw(st.sampled_from(KEYWORDS))
    lines[i] = f"{indent}{new}{sep}{rest}"
    return "\n".join(lines), f"line {i + 1} key -> {new!r}"


@st.composite
def truncate_mutation(draw, text: str) -> tuple[str, str]:
    at = draw(st.integers(0, len(text)))
    return text[:at], f"truncate at {at}"


yaml_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["{{ x }}", "{{ facts.gpu_count }}", "0644", "/etc/x", "all", "present"]))
yaml_trees = st.recursive(
    yaml_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(KEYWORDS) | st.text(string.ascii_lowercase, min_size=1, max_size=6), children, max_size=4),
    max_leaves=12)


def _dump(tree) -> str:
    return yaml.safe_dump(tree, default_flow_style=False, allow_unicode=True)


@st.composite
def tree_mutation(draw, text: str) -> tuple[str, str]:
    """Parse the file, replace one node (or delete one key) with random YAML, dump it back."""
    try:
        tree = yaml.safe_load(text.replace("!secret ", ""))
    except yaml.YAMLError:
        return text, "unparsable: tree left alone"
    nodes = []

    def walk(node, parent, key):
        nodes.append((parent, key))
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, node, k)
        elif isinstance(node, list):
            for k, v in enumerate(node):
                walk(v, node, k)
    walk(tree, None, None)
    parent, key = draw(st.sampled_from(nodes))
    new = draw(yaml_trees)
    if parent is None:
        tree = new
    elif isinstance(parent, dict) and draw(st.booleans()):
        del parent[key]
        new = "<deleted>"
    else:
        parent[key] = new
    try:
        return _dump(tree), f"tree: {key!r} -> {new!r}"
    except yaml.YAMLError:
        return text, "undumpable tree left alone"


@st.composite
def replacement(draw) -> tuple[bytes, str]:
    kind = draw(st.sampled_from(["yaml", "text", "bytes", "empty"]))
    if kind == "yaml":
        return _dump(draw(yaml_trees)).encode(), "replaced by random YAML"
    if kind == "text":
        return draw(st.text(max_size=80)).encode("utf-8", "surrogatepass"), "replaced by random text"
    if kind == "bytes":
        return draw(st.binary(max_size=64)), "replaced by random bytes"
    return b"", "emptied"


TEXT_MUTATIONS = [line_mutation, token_mutation, value_mutation, key_mutation, truncate_mutation, tree_mutation]


@st.composite
def mutated_file(draw, text: str) -> tuple[bytes, list[str]]:
    if draw(st.integers(0, 9)) == 0:
        data, what = draw(replacement())
        return data, [what]
    notes = []
    for _ in range(draw(st.integers(1, 3))):
        mutation = draw(st.sampled_from(TEXT_MUTATIONS))
        text, note = draw(mutation(text))
        notes.append(note)
    return text.encode("utf-8", "surrogatepass"), notes


@st.composite
def cases(draw) -> Case:
    files = {path: text.encode() for path, text in SEED.items()}
    notes: list[str] = []
    targets = draw(st.lists(st.sampled_from(sorted(SEED)), min_size=1, max_size=3, unique=True))
    for path in targets:
        data, what = draw(mutated_file(SEED[path]))
        if not safe(data.decode("utf-8", "replace")):
            continue  # would touch connection settings: keep the seed file
        files[path] = data
        notes.append(f"{path}: {'; '.join(what)}")
    limit = draw(st.sampled_from([None] * 8 + ["node1", "gpu:!node2", "nomatch", "~node[12]", "all"]))
    extra = draw(st.sampled_from([[]] * 4 + [["-e", "@extra.yml"], ["-e", "driver_branch=550"], ["-e", "bad key"]]))
    return Case(files, limit, extra, notes)
