"""gpuconf vault against ansible-vault (ansible-core 2.19, tests/.ansible-venv): what one writes,
the other opens, for whole files and encrypt_string, with and without a vault id; --vault-id is
read as Ansible reads it. No lab: both tools on this machine's files."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuconf.cli.main import main
from tests.ansible_diff.harness import ANSIBLE_VENV

VAULT = ANSIBLE_VENV / "bin" / "ansible-vault"
SECRET = "token: s3cr3t-fleet-value\nnested:\n  - one\n"


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    assert VAULT.exists(), f"{VAULT} is missing: make test builds tests/.ansible-venv"
    first, second = tmp_path / "pass-a", tmp_path / "pass-b"
    first.write_text("correct horse\n")
    second.write_text("battery staple\n")
    return first, second


def ansible_vault(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VAULT), *args], capture_output=True, text=True, timeout=120)


def test_a_file_gpuconf_encrypts_ansible_vault_opens_and_the_reverse(tmp_path, keys, capsys):
    ours, theirs = tmp_path / "ours.yml", tmp_path / "theirs.yml"
    ours.write_text(SECRET)
    theirs.write_text(SECRET)
    assert main(["vault", "encrypt", str(ours), "--vault-password-file", str(keys[0])]) == 0
    assert ours.read_text().startswith("$ANSIBLE_VAULT;1.1;AES256\n") and "s3cr3t" not in ours.read_text()
    opened = ansible_vault("view", str(ours), "--vault-password-file", str(keys[0]))
    assert opened.returncode == 0 and opened.stdout == SECRET, opened.stderr
    assert ansible_vault("encrypt", str(theirs), "--vault-password-file", str(keys[0])).returncode == 0
    capsys.readouterr()
    assert main(["vault", "view", str(theirs), "--vault-password-file", str(keys[0])]) == 0
    assert capsys.readouterr().out == SECRET
    assert main(["vault", "decrypt", str(theirs), "--vault-password-file", str(keys[0])]) == 0
    assert theirs.read_text() == SECRET


def test_vault_ids_label_what_is_written_and_every_password_is_tried_to_read(tmp_path, keys, capsys):
    ours = tmp_path / "ours.yml"
    ours.write_text(SECRET)
    assert main(["vault", "encrypt", str(ours), "--vault-id", f"prod@{keys[1]}", "--vault-id", f"dev@{keys[0]}"]) == 0
    assert ours.read_text().startswith("$ANSIBLE_VAULT;1.2;AES256;prod\n")   # the first id encrypts
    opened = ansible_vault("view", str(ours), "--vault-id", f"prod@{keys[1]}")
    assert opened.returncode == 0 and opened.stdout == SECRET, opened.stderr
    capsys.readouterr()
    assert main(["vault", "view", str(ours), "--vault-id", f"dev@{keys[0]}", "--vault-id", f"prod@{keys[1]}"]) == 0
    assert capsys.readouterr().out == SECRET
    assert main(["vault", "view", str(ours), "--vault-id", f"dev@{keys[0]}"]) == 1   # the wrong password only
    assert "no vault password given opens this vault (id prod)" in capsys.readouterr().err


def test_encrypt_string_is_a_yaml_value_ansible_decrypts_in_a_play(tmp_path, keys, capsys):
    assert main(["vault", "encrypt_string", "s3cr3t-fleet-value", "--name", "token",
                 "--vault-password-file", str(keys[0])]) == 0
    snippet = capsys.readouterr().out
    assert snippet.startswith("token: !vault |\n          $ANSIBLE_VAULT;1.1;AES256\n"), snippet
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  vars:\n"
                    + "".join(f"    {line}\n" for line in snippet.splitlines())
                    + "  tasks:\n    - debug: {msg: \"{{ token }}\"}\n")
    done = subprocess.run([str(ANSIBLE_VENV / "bin" / "ansible-playbook"), str(play), "-c", "local", "-i",
                           "localhost,", "--vault-password-file", str(keys[0])], capture_output=True, text=True,
                          timeout=300, env={"PATH": f"{ANSIBLE_VENV / 'bin'}:/usr/bin:/bin",
                                            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
                                            "ANSIBLE_HOME": str(tmp_path / "ansible")})
    assert done.returncode == 0 and '"msg": "s3cr3t-fleet-value"' in done.stdout, done.stdout + done.stderr


def test_bad_vault_commands_say_why(tmp_path, keys, capsys):
    plain = tmp_path / "plain.yml"
    plain.write_text(SECRET)
    assert main(["vault", "decrypt", str(plain), "--vault-password-file", str(keys[0])]) == 1
    assert "not encrypted with Ansible Vault" in capsys.readouterr().err
    assert main(["vault", "encrypt", str(plain)]) == 1
    assert "no vault password: give --vault-id" in capsys.readouterr().err
    assert main(["vault", "encrypt", str(plain), "--vault-id", "@"]) == 1
    assert "--vault-id '@': give [LABEL@]FILE" in capsys.readouterr().err
    assert plain.read_text() == SECRET and not list(tmp_path.glob(".plain.yml.*"))   # nothing half-written
