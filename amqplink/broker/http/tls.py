"""A self-signed certificate for the management API, made at start with ``cryptography``.

The certificate names ``localhost``, ``127.0.0.1`` and ``::1`` (and any names given: the
broker adds ``<name>.localhost`` for each of its namespaces) and is its own CA,
so a client can trust it by giving its PEM file as the CA bundle (the SDK's
``connection_verify=PATH``). The key never leaves the temporary directory, which
is removed when the server stops.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

from amqplink import MissingExtraError

__all__ = ["CERT_LIFETIME", "Certificate", "self_signed", "server_context"]

CERT_LIFETIME = datetime.timedelta(days=365)
"""How long a generated certificate is valid (from an hour before it is made)."""


@dataclass(frozen=True)
class Certificate:
    """PEM files of a certificate and its key; ``directory`` is set when they are temporary."""

    cert_path: str
    key_path: str
    directory: str | None = None

    def remove(self) -> None:
        """Delete the temporary directory (nothing for files the user gave)."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def self_signed(common_name: str = "localhost", names: Iterable[str] = ()) -> Certificate:
    """A new key and self-signed CA certificate for localhost/127.0.0.1/::1 (and the DNS ``names``,
    e.g. ``second.localhost`` for another namespace) in a private temporary directory.

    Needs ``cryptography`` (the ``broker`` extra); without it, raises
    :class:`~amqplink.MissingExtraError` (a ``RuntimeError``) saying so (a certificate given
    with ``--http-cert``/``--http-key`` needs nothing more).
    """
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:
        raise MissingExtraError(
            "a self-signed certificate for the management API needs cryptography, in the broker extra: "
            "python3 -m pip install 'amqplink[broker]', or give your own with --http-cert/--http-key"
        ) from exc
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + CERT_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                    *(x509.DNSName(n) for n in names),
                ]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    directory = tempfile.mkdtemp(prefix="amqplink-http-")
    cert_path = os.path.join(directory, "cert.pem")
    key_path = os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return Certificate(cert_path, key_path, directory)


def server_context(certificate: Certificate) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 or later) serving ``certificate``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certificate.cert_path, certificate.key_path)
    return context
