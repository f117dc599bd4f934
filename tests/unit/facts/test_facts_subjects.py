"""Facts mirror tasks: every parser in gpuconf/facts has a caller in the product (a task, a
probe, or a `gpuconf facts` subject), and the subjects read only through read-only programs,
files and globs, each parsed by its tool's parser (here on real captures, no host)."""
from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from gpuconf.cli.main import main
from gpuconf.facts.base import READ_ONLY_PROGRAMS
from gpuconf.facts.subjects import SUBJECTS, subject_reads, subject_view
from tests.paths import ROOT
from tests.real import read_real

PRODUCT = ROOT / "gpuconf"
PARSER_PREFIXES = ("parse_", "find_", "detect_", "decode_")


def test_every_parser_has_a_caller_in_the_product():
    defined: dict[str, Path] = {}
    called: set[str] = set()
    for path in PRODUCT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith(PARSER_PREFIXES) \
                    and path.is_relative_to(PRODUCT / "facts") and node.col_offset == 0:
                defined[node.name] = path
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                called.add(node.id)
            elif isinstance(node, ast.Attribute):
                called.add(node.attr)
    assert sorted(name for name in defined if name not in called) == []


def test_subject_reads_are_read_only_and_distinct():
    reads = subject_reads(list(SUBJECTS))
    assert len({f.key for f in reads}) == len(reads)
    for fact in reads:
        if fact.request["op"] == "exec":
            assert os.path.basename(fact.request["argv"][0]) in READ_ONLY_PROGRAMS
        else:
            assert fact.request["op"] in ("stat", "glob")


def reply(rel: str, rc: int = 0) -> dict:
    return {"out": read_real(rel), "err": "", "rc": rc, "timed_out": False}


def test_subjects_parse_real_captures_and_say_why_a_tool_is_missing():
    reads = SUBJECTS["gpus"].reads | SUBJECTS["imex"].reads
    replies = {
        reads["query_xml"].key: reply("nvidia-smi-xml/q-x-535.54.03-a100-sxm4-80gb-telegraf.txt"),
        reads["list"].key: {"out": "", "err": "sh: nvidia-smi: not found", "rc": 127, "timed_out": False},
        reads["domain"].key: reply("imex/imex-ctl-N-gh200-2node-domain-up-jpsnips.txt"),
        reads["version"].key: {"out": "", "err": "", "rc": -9, "timed_out": True, "timeout": 20},
    }
    values = {key: next(f for f in reads.values() if f.key == key).parse(value) for key, value in replies.items()}
    view = json.loads(json.dumps(subject_view(["gpus", "imex"], values)))
    assert view["gpus"]["query_xml"]["gpus"][0]["product_name"] == "NVIDIA A100-SXM4-80GB"
    assert view["gpus"]["list"] == {"unavailable": "nvidia-smi is not installed"}
    assert view["gpus"]["version"] == {"unavailable": "nvidia-smi did not answer within 20 s"}
    assert view["imex"]["domain"]["state"] == "UP" and len(view["imex"]["domain"]["nodes"]) == 2


def test_facts_lists_subjects_and_names_an_unknown_one(capsys):
    assert main(["facts", "--list"]) == 0
    assert "gpus" in capsys.readouterr().out
    assert main(["facts", "node1", "-i", "node1,", "-s", "driver,gpu"]) == 1
    assert "unknown subject 'gpu' (did you mean 'gpus'?)" in capsys.readouterr().err



def test_the_packages_subject_shows_each_package_by_its_fields():
    dpkg = SUBJECTS["packages"].reads["dpkg"]
    value = dpkg.parse(reply("dpkg/dpkg-l-nvidia-glob-440-TRUNCATED-k8s-device-plugin-178.txt"))
    view = json.loads(json.dumps(subject_view(["packages"], {dpkg.key: value})))
    first = view["packages"]["dpkg"]["packages"][0]
    assert "nvidia" in first["name"] and first["status"] in ("installed", "not-installed", "config-files")
    assert {"version", "desired", "arch"} <= set(first)
