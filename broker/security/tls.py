"""TLS for SSL and SASL_SSL listeners: Kafka's `ssl.*` keys resolved per listener, turned into an
`ssl.SSLContext` once at start-up.

Resolution (Kafka's `valuesWithPrefixOverride(listener.name.<lowercase name>.)`): for every ssl key
the listener-prefixed value wins over the plain one, key by key. SASL_SSL listeners ask for client
certificates only when `listener.name.<l>.ssl.client.auth` is set (KIP-684); a broker-wide
`ssl.client.auth` does not apply to them.

Stores (Kafka's DefaultSslEngineFactory rules and messages):
- keystore PEM: `ssl.keystore.location` (a file with the private key and the certificate chain) or
  inline `ssl.keystore.key` + `ssl.keystore.certificate.chain`; an encrypted key needs
  `ssl.key.password`; `ssl.keystore.password` must not be set.
- keystore PKCS12 (also `JKS`, Kafka's default type, when the file is really PKCS12, as Java reads
  it): `ssl.keystore.location` + `ssl.keystore.password`. Real JKS files are refused with the
  keytool command that converts them.
- truststore PEM (`ssl.truststore.location` or inline `ssl.truststore.certificates`) or PKCS12;
  none: the system's default CAs (Kafka: the JVM's cacerts).
Keys are decoded with `cryptography` and handed to OpenSSL through an anonymous memory file
(memfd, never on disk), or where memfd is missing a 0600 temp file removed at once after loading.

Protocols: `ssl.enabled.protocols` (TLSv1.2,TLSv1.3 by default) sets the minimum and maximum
version; `ssl.protocol` is validated only (with enabled protocols given, Java's context protocol
does not restrict them either). `ssl.cipher.suites`: IANA (Java) names of TLS 1.2 suites are
mapped to OpenSSL names (OpenSSL names are taken as they are); TLS 1.3 suites cannot be chosen in
Python's ssl module (all three stay enabled), and a list without any TLS 1.3 suite disables TLS 1.3,
as it does in Java.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from minikafka.broker.config.core import SSL_DEFAULTS, ConfigError
from minikafka.broker.security.ssl_principal import SslPrincipalMapper

if TYPE_CHECKING:
    from minikafka.broker.network.connection import Connection

log = logging.getLogger(__name__)

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CONTEXT_PROTOCOLS = {"TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSL", "SSLv3", "DTLS"}
TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
# IANA (Java) -> OpenSSL names of the TLS 1.2 suites a JDK enables
IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}


def listener_prefix(listener: str) -> str:
    """Kafka's ListenerName.configPrefix()."""
    return f"listener.name.{listener.lower()}."


def listener_ssl_props(get: Callable[[str], str], listener: str, security_protocol: str) -> dict[str, str]:
    """The effective ssl.* values of one listener (`get` reads a key of the broker config, "" if unset)."""
    prefix = listener_prefix(listener)
    out: dict[str, str] = {}
    for key, default in SSL_DEFAULTS.items():
        prefixed = get(prefix + key)
        plain = get(key)
        out[key] = prefixed if prefixed != "" else (plain if plain != "" else default)
    if security_protocol == "SASL_SSL" and get(prefix + "ssl.client.auth") == "":
        if out["ssl.client.auth"].lower() != "none":
            log.warning("listener %s: broker-wide ssl.client.auth does not apply to SASL_SSL listeners; "
                        "set %sssl.client.auth to ask for client certificates", listener, prefix)
        out["ssl.client.auth"] = "none"
    return out


@dataclass
class ListenerTls:
    """What a TLS listener's connections need: the context and how to name a client certificate."""

    context: ssl.SSLContext
    client_auth: str
    mapper: SslPrincipalMapper
    protocols: tuple[str, ...]


def build_listener_tls(props: dict[str, str], listener: str) -> ListenerTls:
    """Validate one listener's ssl.* values and build its server context; ConfigError says what is wrong."""
    try:
        return _build(props, listener)
    except ConfigError as exc:
        raise ConfigError(f"listener {listener}: {exc}") from None


def _opt(props: dict[str, str], key: str) -> str | None:
    value = props.get(key, "")
    return value if value != "" else None


def _build(props: dict[str, str], listener: str) -> ListenerTls:
    auth = props["ssl.client.auth"].strip().lower()
    if auth not in CLIENT_AUTH:
        raise ConfigError(f"Invalid value {props['ssl.client.auth']} for configuration ssl.client.auth: "
                          "String must be one of: required, requested, none")
    if props["ssl.protocol"] not in _CONTEXT_PROTOCOLS:
        raise ConfigError(f"ssl.protocol {props['ssl.protocol']!r} is not a TLS protocol (TLSv1.2, TLSv1.3, TLS)")
    if _opt(props, "ssl.engine.factory.class"):
        raise ConfigError("ssl.engine.factory.class is not supported (Java SslEngineFactory plug-ins)")
    try:
        mapper = SslPrincipalMapper(props["ssl.principal.mapping.rules"])
    except ValueError as exc:
        raise ConfigError(f"ssl.principal.mapping.rules: {exc}") from None
    protocols = tuple(p.strip() for p in props["ssl.enabled.protocols"].split(",") if p.strip())
    if not protocols:
        protocols = ("TLSv1.2", "TLSv1.3")
    unknown = [p for p in protocols if p not in _VERSIONS]
    if unknown:
        raise ConfigError(f"ssl.enabled.protocols: unsupported protocol(s) {', '.join(unknown)} "
                          f"(one of {', '.join(_VERSIONS)})")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.options |= ssl.OP_NO_COMPRESSION
    _set_versions(ctx, protocols)
    _set_ciphers(ctx, _opt(props, "ssl.cipher.suites"), protocols)
    cert_pem, key_pem = _keystore(props)
    _load_cert_chain(ctx, cert_pem, key_pem)
    ctx.verify_mode = CLIENT_AUTH[auth]
    if auth != "none":
        trusted = _truststore(props)
        if trusted is None:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        else:
            ctx.load_verify_locations(cadata=trusted)
    return ListenerTls(ctx, auth, mapper, protocols)


def build_client_context(props: dict[str, str], listener: str) -> ssl.SSLContext:
    """The client side of a TLS listener, for this node's own connections to it (inter-broker and
    controller traffic), from the same resolved ssl.* values (`listener_ssl_props`) as Kafka's broker
    uses them for its client: the truststore verifies the peer (no truststore: the system's default
    CAs, as Kafka falls back to the JVM's cacerts), the keystore (when given) is presented for mutual
    TLS, and `ssl.endpoint.identification.algorithm` (https by default; empty turns it off) checks the
    peer's certificate names the host dialled. ConfigError says what cannot be built."""
    try:
        return _build_client(props)
    except ConfigError as exc:
        raise ConfigError(f"listener {listener}: {exc}") from None


def _build_client(props: dict[str, str]) -> ssl.SSLContext:
    algorithm = props["ssl.endpoint.identification.algorithm"].strip()
    if algorithm.lower() not in ("", "https"):
        raise ConfigError(f"ssl.endpoint.identification.algorithm {algorithm!r} is not supported "
                          "(https, or empty to turn hostname verification off)")
    if props["ssl.protocol"] not in _CONTEXT_PROTOCOLS:
        raise ConfigError(f"ssl.protocol {props['ssl.protocol']!r} is not a TLS protocol (TLSv1.2, TLSv1.3, TLS)")
    if _opt(props, "ssl.engine.factory.class"):
        raise ConfigError("ssl.engine.factory.class is not supported (Java SslEngineFactory plug-ins)")
    protocols = tuple(p.strip() for p in props["ssl.enabled.protocols"].split(",") if p.strip()) \
        or ("TLSv1.2", "TLSv1.3")
    unknown = [p for p in protocols if p not in _VERSIONS]
    if unknown:
        raise ConfigError(f"ssl.enabled.protocols: unsupported protocol(s) {', '.join(unknown)} "
                          f"(one of {', '.join(_VERSIONS)})")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.options |= ssl.OP_NO_COMPRESSION
    _set_versions(ctx, protocols)
    _set_ciphers(ctx, _opt(props, "ssl.cipher.suites"), protocols)
    ctx.check_hostname = algorithm != ""
    ctx.verify_mode = ssl.CERT_REQUIRED
    trusted = _truststore(props)
    if trusted is None:
        log.warning("no ssl.truststore for the client side of a TLS listener: peers are verified against the "
                    "system's default CAs")
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.load_verify_locations(cadata=trusted)
    if any(_opt(props, k) for k in ("ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain")):
        cert_pem, key_pem = _keystore(props)
        _load_cert_chain(ctx, cert_pem, key_pem)
    return ctx


def _set_versions(ctx: ssl.SSLContext, protocols: tuple[str, ...]) -> None:
    order = list(_VERSIONS)
    wanted = sorted({order.index(p) for p in protocols})
    ctx.minimum_version = _VERSIONS[order[wanted[0]]]
    ctx.maximum_version = _VERSIONS[order[wanted[-1]]]
    gaps = {"TLSv1": ssl.OP_NO_TLSv1, "TLSv1.1": ssl.OP_NO_TLSv1_1, "TLSv1.2": ssl.OP_NO_TLSv1_2}
    for i in range(wanted[0], wanted[-1]):
        if i not in wanted:
            ctx.options |= gaps[order[i]]


def _set_ciphers(ctx: ssl.SSLContext, suites: str | None, protocols: tuple[str, ...]) -> None:
    if suites is None:
        return
    names = [s.strip() for s in suites.split(",") if s.strip()]
    tls13 = [n for n in names if n in TLS13_SUITES]
    openssl_names = []
    for name in names:
        if name in TLS13_SUITES:
            continue
        if name.startswith(("TLS_", "SSL_")) and name not in IANA_TO_OPENSSL:
            raise ConfigError(f"ssl.cipher.suites: unknown or unsupported cipher suite {name} "
                              "(give its OpenSSL name instead)")
        openssl_names.append(IANA_TO_OPENSSL.get(name, name))
    if openssl_names:
        try:
            ctx.set_ciphers(":".join(openssl_names))
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites: no usable cipher suite in {suites!r}") from None
    elif "TLSv1.2" in protocols or "TLSv1.1" in protocols or "TLSv1" in protocols:
        if not tls13:
            raise ConfigError(f"ssl.cipher.suites: no usable cipher suite in {suites!r}")
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3  # only TLS 1.3 suites listed
    if not tls13:
        if ctx.minimum_version == ssl.TLSVersion.TLSv1_3:
            raise ConfigError("ssl.cipher.suites lists no TLS 1.3 suite, but only TLSv1.3 is enabled")
        ctx.maximum_version = min(ctx.maximum_version, ssl.TLSVersion.TLSv1_2)
    elif set(tls13) != TLS13_SUITES - {"TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}:
        log.warning("ssl.cipher.suites: TLS 1.3 suites cannot be restricted here; all of "
                    "TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_GCM_SHA256 stay enabled")


# -- stores -------------------------------------------------------------------------------------

def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _pem_blocks(data: bytes, label: str) -> list[bytes]:
    return re.findall(rb"-----BEGIN " + label.encode() + rb"-----.+?-----END " + label.encode() + rb"-----",
                      data, re.S)


def _pem_key(text: bytes, password: str | None, where: str) -> bytes:
    from cryptography.hazmat.primitives import serialization
    found = re.findall(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----.+?-----END [A-Z ]*PRIVATE KEY-----", text, re.S)
    if not found:
        raise ConfigError(f"{where}: Private key not provided")
    if len(found) != 1:
        raise ConfigError(f"{where}: Expected one private key, but found {len(found)}")
    try:
        key = serialization.load_pem_private_key(found[0], password.encode() if password else None)
    except TypeError as exc:  # encrypted without a password, or a password for a plain key
        hint = "set ssl.key.password" if password is None else "ssl.key.password is set but the key is not encrypted"
        raise ConfigError(f"{where}: private key could not be loaded ({exc}); {hint}") from None
    except ValueError:
        raise ConfigError(f"{where}: private key could not be loaded (wrong ssl.key.password, "
                          "or not a PEM private key)") from None
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_certs(text: bytes, where: str) -> bytes:
    from cryptography import x509
    blocks = _pem_blocks(text, "CERTIFICATE")
    if not blocks:
        raise ConfigError(f"{where}: At least one certificate expected, but none found")
    for block in blocks:
        try:
            x509.load_pem_x509_certificate(block)
        except ValueError as exc:
            raise ConfigError(f"{where}: invalid certificate: {exc}") from None
    return b"\n".join(blocks) + b"\n"


def _load_pkcs12(path: str, password: str | None, what: str):
    from cryptography.hazmat.primitives.serialization import pkcs12
    data = _read(path, what)
    if data[:4] == b"\xfe\xed\xfe\xed":
        raise ConfigError(f"{what} {path} is a JKS file, which minikafka cannot read; convert it with "
                          f"keytool -importkeystore -srckeystore {path} -destkeystore store.p12 "
                          "-deststoretype PKCS12, and set its type to PKCS12")
    if data.lstrip()[:10] == b"-----BEGIN":
        raise ConfigError(f"{what} {path} is a PEM file: set its type to PEM")
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise ConfigError(f"Failed to load SSL {what} {path} of type PKCS12: wrong password or "
                          f"not a PKCS12 file ({exc})") from None


def _keystore(props: dict[str, str]) -> tuple[bytes, bytes]:
    """(certificate chain PEM, unencrypted PKCS#8 key PEM) of the listener's keystore."""
    from cryptography.hazmat.primitives import serialization
    kind = props["ssl.keystore.type"].strip().upper()
    path = _opt(props, "ssl.keystore.location")
    password = _opt(props, "ssl.keystore.password")
    key_password = _opt(props, "ssl.key.password")
    inline_key = _opt(props, "ssl.keystore.key")
    inline_chain = _opt(props, "ssl.keystore.certificate.chain")
    if inline_key is not None:
        if kind != "PEM":
            raise ConfigError(f"SSL private key can be specified only for PEM, but key store type is {kind}.")
        if inline_chain is None:
            raise ConfigError("SSL private key is specified, but certificate chain is not specified.")
        if path is not None:
            raise ConfigError("Both SSL key store location and separate private key are specified.")
        if password is not None:
            raise ConfigError("SSL key store password cannot be specified with PEM format, "
                              "only key password may be specified.")
        return (_pem_certs(inline_chain.encode(), "ssl.keystore.certificate.chain"),
                _pem_key(inline_key.encode(), key_password, "ssl.keystore.key"))
    if inline_chain is not None:
        raise ConfigError("SSL certificate chain is specified, but private key is not specified")
    if path is None:
        raise ConfigError("an SSL listener needs a keystore: set ssl.keystore.location (or, with "
                          "ssl.keystore.type=PEM, ssl.keystore.key and ssl.keystore.certificate.chain)")
    if kind == "PEM":
        if password is not None:
            raise ConfigError("SSL key store password cannot be specified with PEM format, "
                              "only key password may be specified")
        text = _read(path, "SSL keystore")
        where = f"PEM SSL keystore {path}"
        return _pem_certs(text, where), _pem_key(text, key_password, where)
    if kind not in ("PKCS12", "JKS"):
        raise ConfigError(f"ssl.keystore.type {kind} is not supported (PEM, PKCS12)")
    if password is None:
        raise ConfigError("SSL key store is specified, but key store password is not specified.")
    store = _load_pkcs12(path, password, "keystore")
    if store.key is None or store.cert is None:
        raise ConfigError(f"keystore {path} holds no private key with its certificate")
    chain = [store.cert.certificate] + [c.certificate for c in store.additional_certs]
    cert_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    key_pem = store.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    return cert_pem, key_pem


def _truststore(props: dict[str, str]) -> str | None:
    """PEM text of the trusted certificates, None for the system's default CAs."""
    from cryptography.hazmat.primitives import serialization
    kind = props["ssl.truststore.type"].strip().upper()
    path = _opt(props, "ssl.truststore.location")
    password = _opt(props, "ssl.truststore.password")
    inline = _opt(props, "ssl.truststore.certificates")
    if inline is not None:
        if kind != "PEM":
            raise ConfigError(f"SSL trust store certs can be specified only for PEM, but trust store type is {kind}.")
        if path is not None:
            raise ConfigError("Both SSL trust store location and separate trust certificates are specified.")
        if password is not None:
            raise ConfigError("SSL trust store password cannot be specified for PEM format.")
        return _pem_certs(inline.encode(), "ssl.truststore.certificates").decode()
    if path is None:
        if password is not None:
            raise ConfigError("SSL trust store is not specified, but trust store password is specified.")
        return None
    if kind == "PEM":
        if password is not None:
            raise ConfigError("SSL trust store password cannot be specified for PEM format.")
        return _pem_certs(_read(path, "SSL truststore"), f"PEM SSL truststore {path}").decode()
    if kind not in ("PKCS12", "JKS"):
        raise ConfigError(f"ssl.truststore.type {kind} is not supported (PEM, PKCS12)")
    store = _load_pkcs12(path, password, "truststore")
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise ConfigError(f"truststore {path} holds no certificate")
    return "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _load_cert_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """OpenSSL reads keys from files only: an anonymous memory file (memfd), else a 0600 temp file
    that is removed right after loading."""
    data = cert_pem + b"\n" + key_pem
    try:
        if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
            fd = os.memfd_create("minikafka-keystore", os.MFD_CLOEXEC)
            try:
                with os.fdopen(os.dup(fd), "wb") as f:
                    f.write(data)
                ctx.load_cert_chain(f"/proc/self/fd/{fd}")
            finally:
                os.close(fd)
            return
        fd, name = tempfile.mkstemp(prefix="minikafka-keystore-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            ctx.load_cert_chain(name)
        finally:
            os.unlink(name)
    except ssl.SSLError as exc:
        raise ConfigError(f"the keystore's private key and certificate do not fit together ({exc.reason})") from None


# -- accepting TLS connections ------------------------------------------------------------------

def _ssl_protocol_base(loop: asyncio.AbstractEventLoop) -> type:
    """The event loop's own TLS protocol (uvloop's, or asyncio's under the plain loop)."""
    try:
        import uvloop
        from uvloop.loop import SSLProtocol as UvSSLProtocol
        if isinstance(loop, uvloop.Loop):
            return UvSSLProtocol
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        pass
    from asyncio.sslproto import SSLProtocol
    return SSLProtocol


def tls_protocol_factory(loop: asyncio.AbstractEventLoop, make_connection: Callable[[], "Connection"],
                         tls: ListenerTls, handshake_timeout_s: float) -> Callable[[], asyncio.BaseProtocol]:
    """Protocols for a TLS listener: the loop's TLS protocol around a new Connection. The Connection
    is admitted at TCP accept (before the handshake); after the handshake its `connection_made`
    gets the TLS transport; a failed, timed-out or abandoned handshake ends in `tls_failed`."""
    base = _ssl_protocol_base(loop)

    class TlsAccept(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if self.minikafka_conn.tcp_accepted(transport):
                super().connection_made(transport)

    def factory() -> asyncio.BaseProtocol:
        conn = make_connection()
        waiter = loop.create_future()
        proto = TlsAccept(loop, conn, tls.context, waiter, server_side=True,
                          ssl_handshake_timeout=handshake_timeout_s)
        proto.minikafka_conn = conn

        def handshake_done(fut: asyncio.Future) -> None:
            exc = None if fut.cancelled() else fut.exception()
            if exc is not None or not conn.tls_ready:
                if conn.admitted:
                    conn.tls_failed(exc or ConnectionResetError("peer closed the connection during the handshake"))
        waiter.add_done_callback(handshake_done)
        return proto
    return factory
