"""Test PKI made at test time (never committed): a CA, a server certificate for 127.0.0.1/localhost,
client certificates, and a second CA nobody trusts. Files in PEM and PKCS12 as Kafka's configs want them."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "test-secret"


def _name(cn: str, ou: str | None = None, o: str | None = "acme") -> x509.Name:
    attrs = []
    if o:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o))
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


@dataclass
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    chain: list[x509.Certificate]

    def cert_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [self.cert, *self.chain])

    def key_pem(self, password: str | None = None) -> bytes:
        enc = (serialization.BestAvailableEncryption(password.encode()) if password
               else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)

    def p12(self, password: str = PASSWORD) -> bytes:
        return pkcs12.serialize_key_and_certificates(b"kafka", self.key, self.cert, self.chain or None,
                                                     serialization.BestAvailableEncryption(password.encode()))


class CA:
    def __init__(self, cn: str = "minikafka-test-ca") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        name = _name(cn, o=None)
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                    critical=True)
                     .sign(self.key, hashes.SHA256()))

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def truststore_p12(self, password: str = PASSWORD) -> bytes:
        return pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.cert, b"ca")], serialization.BestAvailableEncryption(password.encode()))

    def issue(self, subject: x509.Name, server: bool) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(self.cert.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                   else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        return Issued(key, b.sign(self.key, hashes.SHA256()), [])


class Pki:
    """Files under `root`: ca.pem, server.pem (key + chain), server.p12, truststore.p12, client/other
    client key and certificate PEMs (for librdkafka's ssl.certificate.location / ssl.key.location)."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.ca = CA()
        self.other_ca = CA("someone-else-ca")
        self.server = self.ca.issue(_name("localhost", "brokers"), server=True)
        self.client = self.ca.issue(_name("alice", "eng"), server=False)
        self.stranger = self.other_ca.issue(_name("mallory", "eng"), server=False)
        self.write("ca.pem", self.ca.cert_pem())
        self.write("other-ca.pem", self.other_ca.cert_pem())
        self.write("server.pem", self.server.key_pem() + self.server.cert_pem())
        self.write("server-enc.pem", self.server.key_pem(PASSWORD) + self.server.cert_pem())
        self.write("server.p12", self.server.p12())
        self.write("truststore.p12", self.ca.truststore_p12())
        for who, issued in (("client", self.client), ("stranger", self.stranger)):
            self.write(f"{who}.crt", issued.cert_pem())
            self.write(f"{who}.key", issued.key_pem())
            self.write(f"{who}.p12", issued.p12())

    def write(self, name: str, data: bytes) -> Path:
        path = self.root / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def path(self, name: str) -> str:
        return str(self.root / name)
