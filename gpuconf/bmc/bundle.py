"""A firmware bundle's packages, checked on the controller before anything is sent: each file's
SHA-256 against the bundle's, and its detached signature against the provider's public key.

Signatures (through `cryptography`, which paramiko already depends on): an Ed25519 signature of
the file's bytes (`openssl pkeyutl -sign -rawin -inkey key.pem -in PKG -out PKG.sig`), or an RSA
PKCS#1 v1.5 signature of its SHA-256 (`openssl dgst -sha256 -sign key.pem -out PKG.sig PKG`); the
`.sig` file holds the raw signature or its base64. The public key is PEM (SubjectPublicKeyInfo).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20


@dataclass(frozen=True)
class PackageCheck:
    """What the controller found of one package file: its SHA-256 and whether it is the bundle's
    and signed by the provider. `problem` is None when it may be sent."""

    file: str
    sha256: str | None
    problem: str | None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _signature_bytes(raw: bytes) -> bytes:
    text = raw.strip()
    try:
        decoded = base64.b64decode(text, validate=True)
        if decoded and len(decoded) in (64, 256, 384, 512):
            return decoded
    except (binascii.Error, ValueError):
        pass
    return raw


def verify_signature(data_path: Path, signature_path: Path, public_key_path: Path) -> str | None:
    """None when `signature_path` is a valid signature of the file by the key, else why not."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa

    try:
        key = serialization.load_pem_public_key(public_key_path.read_bytes())
    except (OSError, ValueError) as exc:
        return f"the provider's public key {public_key_path} cannot be read: {exc}"
    try:
        signature = _signature_bytes(signature_path.read_bytes())
        data = data_path.read_bytes()
    except OSError as exc:
        return f"cannot read {exc.filename}: {exc.strerror}"
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, data)
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
        else:
            return f"{public_key_path}: an {type(key).__name__} key; Ed25519 or RSA are accepted"
    except InvalidSignature:
        return f"its signature {signature_path.name} does not verify against {public_key_path}"
    return None


def check_package(file: str, sha256: str, signature: str, public_key: str) -> PackageCheck:
    """The checks of one package, in the order that costs least: present, hash, signature."""
    path, sig, key = Path(file), Path(signature), Path(public_key)
    if not path.is_file():
        return PackageCheck(file, None, f"package {file} does not exist")
    found = file_sha256(path)
    if found != sha256.lower():
        return PackageCheck(file, found, f"package {path.name}: SHA-256 {found} is not the bundle's {sha256.lower()}")
    if not sig.is_file():
        return PackageCheck(file, found, f"package {path.name}: signature {signature} does not exist")
    problem = verify_signature(path, sig, key)
    return PackageCheck(file, found, f"package {path.name}: {problem}" if problem else None)
