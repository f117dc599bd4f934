"""The SSH key file is read once for every host of a run, and read again when it changes; a key
that does not load on its own (encrypted, missing) is left to paramiko, whose error is reported."""
from __future__ import annotations

import os

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from gpuconf.connection.ssh import private_key


def write_key(path, key, password: bytes | None = None, openssh: bool = True) -> None:
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    fmt = serialization.PrivateFormat.OpenSSH if openssh else serialization.PrivateFormat.TraditionalOpenSSL
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, fmt, encryption))


def test_a_key_file_is_parsed_once_while_it_is_unchanged(tmp_path):
    path = tmp_path / "id_ed25519"
    write_key(path, ed25519.Ed25519PrivateKey.generate())
    first = private_key(str(path))
    assert first is not None and first.get_name() == "ssh-ed25519"
    assert private_key(str(path)) is first
    write_key(path, ed25519.Ed25519PrivateKey.generate())
    os.utime(path, ns=(1, 1))  # a new key written within the same clock tick still differs in mtime here
    second = private_key(str(path))
    assert second is not None and second is not first and second.get_fingerprint() != first.get_fingerprint()


def test_an_rsa_key_in_the_old_pem_format_loads_as_rsa(tmp_path):
    path = tmp_path / "id_rsa"
    write_key(path, rsa.generate_private_key(public_exponent=65537, key_size=2048), openssh=False)
    key = private_key(str(path))
    assert key is not None and key.get_name() == "ssh-rsa"


def test_an_encrypted_or_missing_key_is_left_to_paramiko(tmp_path):
    path = tmp_path / "id_locked"
    write_key(path, ed25519.Ed25519PrivateKey.generate(), password=b"secret")
    assert private_key(str(path)) is None
    assert private_key(str(tmp_path / "absent")) is None
