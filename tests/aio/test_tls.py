"""``amqps://``: the client over TLS to the embedded broker with a certificate made here."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import amqplink
from amqplink import Message
from amqplink.aio.errors import ConnectionClosedError
from amqplink.broker import Broker
from tests.receiving import receive_exactly


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: (cert.pem, key.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "amqplink test broker")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def _server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return context


async def test_amqps_round_trip_with_a_trusted_certificate(certificate: tuple[Path, Path]) -> None:
    async with Broker() as plain:
        assert plain.url.startswith("amqp://")
    broker = await Broker().start(ssl_context=_server_context(certificate))
    try:
        assert broker.url.startswith("amqps://")
        client_context = ssl.create_default_context(cafile=str(certificate[0]))
        async with await amqplink.connect(broker.url, ssl_context=client_context) as conn:
            assert conn.protocol.transport is not None
            assert conn.protocol.transport.get_extra_info("ssl_object") is not None  # really TLS
            sender = await conn.create_sender("secure")
            outcomes = await sender.send_many(Message(f"m{i}".encode()) for i in range(20))
            assert [type(o).__name__ for o in outcomes] == ["Accepted"] * 20
            receiver = await conn.create_receiver("secure", prefetch=20)
            got = [m.body for m in await receive_exactly(receiver, 20, batch=20)]
            assert got == [f"m{i}".encode() for i in range(20)]
    finally:
        await broker.stop()


async def test_amqps_with_an_untrusted_certificate_fails_clearly(certificate: tuple[Path, Path]) -> None:
    broker = await Broker().start(ssl_context=_server_context(certificate))
    try:
        with pytest.raises(ConnectionClosedError) as info:
            await amqplink.connect(broker.url, timeout=10)  # the system's CAs do not know this certificate
        text = str(info.value)
        assert broker.url in text and "CERTIFICATE_VERIFY_FAILED" in text
        assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)
    finally:
        await broker.stop()


async def test_amqps_to_a_plain_port_says_the_peer_does_not_speak_tls() -> None:
    """A connection string without UseDevelopmentEmulator=true goes over TLS: against the
    embedded broker it failed with only "[SSL: WRONG_VERSION_NUMBER] wrong version number"."""
    broker = await Broker().start()
    try:
        with pytest.raises(ConnectionClosedError) as info:
            await amqplink.connect(broker.url.replace("amqp://", "amqps://"), timeout=10)
        text = str(info.value)
        assert "WRONG_VERSION_NUMBER" in text and "does not speak TLS on this port" in text
        assert "UseDevelopmentEmulator=true" in text and "is the broker running" not in text
    finally:
        await broker.stop()
