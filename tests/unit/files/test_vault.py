"""Ansible Vault files made by the reference implementation (tests/fixtures/vault/HOW.md),
decrypted with the `cryptography` library, and redacted from every output."""
from __future__ import annotations

import binascii
import json
import shutil

import pytest

from gpuconf.cli.main import main
from gpuconf.errors import PlaybookError
from gpuconf.files import vault, yamlsrc
from tests import paths

FIXTURES = paths.FIXTURES / "vault"
PASSWORD = (FIXTURES / "password.txt").read_text().strip()
PLAIN = {"vault_token": "s3cr3t-T0ken-4711", "vault_port": 2222, "vault_list": ["alpha-secret-item", 42]}


@pytest.fixture
def keyring():
    vault.KEYRING.clear()
    yield vault.KEYRING
    vault.KEYRING.clear()


@pytest.mark.parametrize("name", ["secrets.yml", "secrets-id.yml"], ids=["1.1", "1.2 with a vault id"])
def test_a_vault_file_made_by_ansible_vault_decrypts(keyring, name):
    keyring.add(PASSWORD)
    data = yamlsrc.plain(yamlsrc.load_file(FIXTURES / name))
    assert data == PLAIN
    assert isinstance(data["vault_token"], yamlsrc.Secret) and isinstance(data["vault_list"][0], yamlsrc.Secret)


def test_an_inline_vault_value_decrypts_and_the_rest_stays_plain(keyring):
    keyring.add(PASSWORD)
    data = yamlsrc.plain(yamlsrc.load_file(FIXTURES / "inline.yml"))
    assert data == {"plain_name": "visible-value", "inline_token": "inline-s3cret-9876"}
    assert isinstance(data["inline_token"], yamlsrc.Secret) and not isinstance(data["plain_name"], yamlsrc.Secret)


def test_no_password_and_a_wrong_one_say_so(keyring, tmp_path):
    with pytest.raises(PlaybookError, match=r"secrets.yml:1:1: encrypted with Ansible Vault .* --vault-password-file"):
        yamlsrc.load_file(FIXTURES / "secrets.yml")
    keyring.add("not the password")
    with pytest.raises(PlaybookError, match="the wrong password"):
        yamlsrc.load_file(FIXTURES / "secrets.yml")
    with pytest.raises(PlaybookError, match=r"inline.yml:2:15: .*wrong password"):
        yamlsrc.load_file(FIXTURES / "inline.yml")


def test_a_tampered_vault_is_refused_before_decryption(keyring, tmp_path):
    header, *body = (FIXTURES / "secrets.yml").read_text().splitlines()
    salt, mac, data = binascii.unhexlify("".join(body)).decode().split("\n")
    data = ("0" if data[0] != "0" else "1") + data[1:]   # the ciphertext's first byte changed
    (tmp_path / "t.yml").write_text(header + "\n" + binascii.hexlify(f"{salt}\n{mac}\n{data}".encode()).decode())
    keyring.add(PASSWORD)
    with pytest.raises(PlaybookError, match="no vault password given opens this vault"):
        yamlsrc.load_file(tmp_path / "t.yml")


def test_a_run_decrypts_vars_files_and_redacts_every_output(tmp_path, capsys, keyring):
    shutil.copy(FIXTURES / "secrets.yml", tmp_path / "secrets.yml")
    (tmp_path / "site.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  vars_files: [secrets.yml]\n  tasks:\n"
        "    - debug: {msg: 'token={{ vault_token }} port={{ vault_port }} first={{ vault_list[0] }}'}\n"
        f"    - file: {{path: '{tmp_path}/out.conf', content: 'token={{{{ vault_token }}}}'}}\n")
    report = tmp_path / "report.json"
    code = main(["check", str(tmp_path / "site.yml"), "-i", "h1,", "-c", "local", "--no-retry-file", "--diff",
                 "--vault-password-file", str(FIXTURES / "password.txt"), "--report", str(report)])
    out = capsys.readouterr().out
    assert code == 2
    assert "token=******** port=2222 first=********" in out
    for text in (out, report.read_text()):
        assert "s3cr3t-T0ken-4711" not in text and "alpha-secret-item" not in text
    assert not (tmp_path / "out.conf").exists()
    tasks = json.loads(report.read_text())["hosts"]["h1"]["tasks"]
    assert tasks[0]["message"] == "token=******** port=2222 first=********"


def test_inventory_group_vars_in_a_vault_and_an_executable_password_file(tmp_path, capsys, keyring):
    (tmp_path / "group_vars").mkdir()
    shutil.copy(FIXTURES / "secrets.yml", tmp_path / "group_vars" / "all.yml")
    (tmp_path / "hosts.yml").write_text("all:\n  hosts: {n1: {}}\n")
    script = tmp_path / "pass.sh"
    script.write_text(f"#!/bin/sh\necho '{PASSWORD}'\n")
    script.chmod(0o755)
    assert main(["inventory", "-i", str(tmp_path / "hosts.yml"), "--host", "n1",
                 "--vault-password-file", str(script)]) == 0
    shown = json.loads(capsys.readouterr().out)["vars"]
    assert shown["vault_token"] == "********" and shown["vault_list"][0] == "********"
    assert main(["inventory", "-i", str(tmp_path / "hosts.yml")]) == 1
    assert "encrypted with Ansible Vault" in capsys.readouterr().err
