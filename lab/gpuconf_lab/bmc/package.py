"""The lab's firmware packages and the lab provider that signs them.

A lab package is a JSON document, not NVIDIA's PLDM `.fwpkg` (the lab has no real images to
carry): the package's name, the component -> version it installs, an image payload, and an
Ed25519 signature of all of that by the lab provider's key, which the lab BMC checks as a real
BMC's ERoT checks NVIDIA's signature. Beside each package the provider publishes a detached
signature of the whole file (`PKG.sig`, what gpuconf's `firmware` task verifies before it sends
anything) and its public key (`provider.pem`).
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

FORMAT = "gpuconf-lab-fwpkg/1"


class PackageError(ValueError):
    """An image the BMC refuses: not a lab package, or its signature does not verify."""


@dataclass(frozen=True)
class Package:
    name: str
    components: dict[str, str]


def _canonical(document: dict) -> bytes:
    return json.dumps({k: v for k, v in document.items() if k != "signature"}, sort_keys=True,
                      separators=(",", ":")).encode()


def build(name: str, components: dict[str, str], key, size: int = 4096) -> bytes:
    """A package signed with `key` (an Ed25519 private key); its payload is `size` bytes derived
    from its name and versions, so the same package is the same file every time."""
    seed = hashlib.sha256(json.dumps([name, components], sort_keys=True).encode()).digest()
    payload = (seed * (size // len(seed) + 1))[:size]
    document = {"format": FORMAT, "package": name, "components": dict(components),
                "image": base64.b64encode(payload).decode()}
    document["signature"] = base64.b64encode(key.sign(_canonical(document))).decode()
    return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()


def read(data: bytes, public_key) -> Package:
    """The package in `data`, its signature checked against the provider's `public_key`."""
    from cryptography.exceptions import InvalidSignature

    try:
        document = json.loads(data)
    except ValueError:
        raise PackageError("not a firmware package (no package header)") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise PackageError("not a firmware package (no package header)")
    components = document.get("components")
    if not isinstance(components, dict) or not components:
        raise PackageError("the package names no component")
    try:
        public_key.verify(base64.b64decode(str(document.get("signature", ""))), _canonical(document))
    except (InvalidSignature, ValueError):
        raise PackageError("the package's signature does not verify") from None
    return Package(str(document.get("package", "")), {str(k): str(v) for k, v in components.items()})


def provider_key(path: Path):
    """The lab provider's Ed25519 key, made the first time (0600)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if path.exists():
        return serialization.load_pem_private_key(path.read_bytes(), password=None)
    key = ed25519.Ed25519PrivateKey.generate()
    path.touch(mode=0o600)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return key


def public_pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def publish(directory: Path, bundle: str, packages: list[tuple[str, dict[str, str]]], key) -> dict:
    """Write a bundle's packages, their detached signatures and the provider's key into
    `directory`; the `firmware_bundle` value that names them (what a site's group_vars hold)."""
    directory.mkdir(parents=True, exist_ok=True)
    public = directory / "provider.pem"
    public.write_bytes(public_pem(key))
    listed, wanted = [], {}
    for file_name, components in packages:
        data = build(file_name.rsplit(".", 1)[0], components, key)
        path = directory / file_name
        path.write_bytes(data)
        path.with_name(file_name + ".sig").write_bytes(base64.b64encode(key.sign(data)) + b"\n")
        listed.append({"file": str(path), "sha256": hashlib.sha256(data).hexdigest(),
                       "signature": str(path) + ".sig", "components": sorted(components)})
        wanted.update(components)
    return {"name": bundle, "components": dict(sorted(wanted.items())), "packages": listed,
            "public_key": str(public)}
