"""Ansible Vault (format 1.1 and 1.2, AES256): whole encrypted variable files and `!vault |`
values inside YAML are read, so that existing fleets' vaults work as they are, and `gpuconf
vault` writes them the way ansible-vault does (ansible-vault opens what it writes).

The format (Ansible's `parsing/vault/__init__.py`, VaultAES256): the header line
`$ANSIBLE_VAULT;1.1;AES256` (1.2 adds `;VAULT_ID`), then hex lines that decode to three
hex lines: salt, HMAC-SHA256 and ciphertext. PBKDF2-HMAC-SHA256 (10,000 rounds) derives
80 bytes from the password and salt: the AES key, the HMAC key and the counter block.
The HMAC is checked (in constant time) before AES-256-CTR decrypts; the plaintext ends
in PKCS#7 padding. The crypto is the `cryptography` library's, never written here.

The vault passwords come from `--vault-password-file`, `--ask-vault-pass`, gpuconf.cfg's
`vault_password_file` or GPUCONF_VAULT_PASSWORD_FILE; the CLI hands them to `KEYRING`
once, before anything is loaded. Every decrypted string is a secret (`!secret`): redacted
from every output. The `cryptography` primitives are imported by `decrypt` only: a run
that opens no vault never loads them.
"""
from __future__ import annotations

import binascii
import os
import subprocess
from pathlib import Path

from gpuconf.errors import UsageError

HEADER = "$ANSIBLE_VAULT"
ROUNDS = 10000


class VaultError(Exception):
    """A vault that cannot be opened: no password, the wrong one, or not a vault."""


def is_vault(text: str) -> bool:
    return text.lstrip().startswith(HEADER + ";")


def _keys(password: bytes, salt: bytes) -> tuple[bytes, bytes, bytes]:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    derived = PBKDF2HMAC(algorithm=hashes.SHA256(), length=80, salt=salt, iterations=ROUNDS).derive(password)
    return derived[:32], derived[32:64], derived[64:]


def _parts(text: str) -> tuple[str, bytes, bytes, bytes]:
    lines = text.strip().splitlines()
    header = lines[0].strip().split(";")
    if len(header) < 3 or header[0] != HEADER:
        raise VaultError("not an Ansible Vault (its first line is not $ANSIBLE_VAULT;VERSION;CIPHER)")
    version, cipher = header[1].strip(), header[2].strip()
    if version not in ("1.1", "1.2"):
        raise VaultError(f"vault format {version} is not supported (1.1 and 1.2 are)")
    if cipher != "AES256":
        raise VaultError(f"vault cipher {cipher} is not supported (AES256 is)")
    label = header[3].strip() if version == "1.2" and len(header) > 3 else "default"
    try:
        inner = binascii.unhexlify("".join(line.strip() for line in lines[1:])).decode()
        salt, mac, data = (binascii.unhexlify(part) for part in inner.split("\n", 2))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise VaultError("the vault's body is damaged (not the hex Ansible writes)") from None
    return label, salt, mac, data


def decrypt(text: str, passwords: list[bytes]) -> str:
    """The plaintext of a vault, with the first password that opens it."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.hmac import HMAC

    label, salt, mac, data = _parts(text)
    if not passwords:
        raise VaultError(f"encrypted with Ansible Vault (id {label}): give --vault-password-file FILE or "
                         "--ask-vault-pass")
    for password in passwords:
        aes_key, hmac_key, counter = _keys(password, salt)
        check = HMAC(hmac_key, hashes.SHA256())
        check.update(data)
        try:
            check.verify(mac)
        except InvalidSignature:
            continue
        decryptor = Cipher(algorithms.AES(aes_key), modes.CTR(counter)).decryptor()
        padded = decryptor.update(data) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        try:
            plain = unpadder.update(padded) + unpadder.finalize()
            return plain.decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise VaultError("the vault decrypted to something that is not UTF-8 text") from None
    raise VaultError(f"no vault password given opens this vault (id {label}): the wrong password")


def encrypt(plaintext: str, password: bytes, label: str | None = None) -> str:
    """`plaintext` as ansible-vault writes it: format 1.1, or 1.2 when it carries a vault id."""
    from cryptography.hazmat.primitives import hashes, padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.hmac import HMAC

    salt = os.urandom(32)
    aes_key, hmac_key, counter = _keys(password, salt)
    padder = padding.PKCS7(128).padder()
    padded = padder.update(plaintext.encode("utf-8")) + padder.finalize()
    encryptor = Cipher(algorithms.AES(aes_key), modes.CTR(counter)).encryptor()
    data = encryptor.update(padded) + encryptor.finalize()
    mac = HMAC(hmac_key, hashes.SHA256())
    mac.update(data)
    body = b"\n".join(binascii.hexlify(part) for part in (salt, mac.finalize(), data))
    text = binascii.hexlify(body).decode()
    header = f"{HEADER};1.2;AES256;{label}" if label and label != "default" else f"{HEADER};1.1;AES256"
    return "\n".join([header, *(text[i:i + 80] for i in range(0, len(text), 80))]) + "\n"


class Keyring:
    """The run's vault passwords, set once by the CLI before any file is loaded."""

    def __init__(self) -> None:
        self.passwords: list[bytes] = []
        self.labels: list[str] = []  # the vault id of each password (--vault-id LABEL@SOURCE), "default" else

    def add(self, password: str | bytes, label: str = "default") -> None:
        value = password.encode() if isinstance(password, str) else password
        if value and value not in self.passwords:
            self.passwords.append(value)
            self.labels.append(label)

    def clear(self) -> None:
        self.passwords.clear()
        self.labels.clear()

    def first(self) -> tuple[bytes, str]:
        """The password (and vault id) that encrypts: the first given, as ansible-vault takes it."""
        if not self.passwords:
            raise UsageError("no vault password: give --vault-id [LABEL@]FILE, --vault-password-file FILE or "
                             "--ask-vault-pass")
        return self.passwords[0], self.labels[0]

    def open(self, text: str) -> str:
        return decrypt(text, self.passwords)


KEYRING = Keyring()


def read_password_file(path: str) -> bytes:
    """A vault password file, as Ansible reads one: its first line, or, when the file is
    executable, what it prints (a script that asks a password manager)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise UsageError(f"vault password file {path}: no such file")
    if file.stat().st_mode & 0o111:
        try:
            done = subprocess.run([str(file)], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UsageError(f"vault password script {path}: {exc}") from None
        if done.returncode != 0:
            raise UsageError(f"vault password script {path} exited {done.returncode}")
        data = done.stdout
    else:
        from gpuconf.files.bounded import read_source  # bounded, as every file the user gives

        data = read_source(file, UsageError)
    password = data.splitlines()[0].strip() if data.strip() else b""
    if not password:
        raise UsageError(f"vault password file {path} is empty")
    return password


def parse_vault_id(value: str) -> tuple[str, str]:
    """`--vault-id [LABEL@]SOURCE` as Ansible reads it: SOURCE is a password file, an executable,
    or `prompt`; the label is "default" when none is given."""
    label, sep, source = value.partition("@")
    if not sep:
        label, source = "default", value
    if not label or not source:
        raise UsageError(f"--vault-id {value!r}: give [LABEL@]FILE or [LABEL@]prompt")
    return label, source
