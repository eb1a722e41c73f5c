"""broker/security/tls.py: per-listener resolution of ssl.* keys and the TLS context built from them."""
from __future__ import annotations

import logging
import ssl

import pytest

from minikafka.broker.config.core import BrokerConfig, ConfigError
from minikafka.broker.security.tls import build_listener_tls, listener_ssl_props
from tests.support.tls_certs import PASSWORD, Pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def props(**kv: str):
    values = {k.replace("_", "."): v for k, v in kv.items()}
    return lambda key: values.get(key, "")


def test_listener_prefix_wins_key_by_key():
    get = props(**{"ssl_keystore_location": "/all.pem", "ssl_client_auth": "required",
                   "listener_name_internal_ssl_client_auth": "none"})
    internal = listener_ssl_props(get, "INTERNAL", "SSL")
    other = listener_ssl_props(get, "EXTERNAL", "SSL")
    assert internal["ssl.keystore.location"] == other["ssl.keystore.location"] == "/all.pem"
    assert internal["ssl.client.auth"] == "none" and other["ssl.client.auth"] == "required"
    assert internal["ssl.enabled.protocols"] == "TLSv1.2,TLSv1.3"  # Kafka's default


def test_sasl_ssl_listeners_ask_for_certificates_only_with_the_listener_key(caplog):
    get = props(ssl_client_auth="required", listener_name_secure_ssl_client_auth="requested")
    with caplog.at_level(logging.WARNING):
        assert listener_ssl_props(get, "SASL_SSL", "SASL_SSL")["ssl.client.auth"] == "none"
    assert "does not apply to SASL_SSL" in caplog.text
    assert listener_ssl_props(get, "SECURE", "SASL_SSL")["ssl.client.auth"] == "requested"


def test_listener_prefixed_ssl_keys_are_known(caplog):
    with caplog.at_level(logging.WARNING):
        BrokerConfig({"listener.name.ssl.ssl.keystore.location": "/x", "ssl.truststore.type": "PEM"})
    assert "unknown config key" not in caplog.text
    with caplog.at_level(logging.WARNING):
        BrokerConfig({"listener.name.ssl.ssl.no.such.key": "1"})
    assert "unknown config key" in caplog.text


def _tls(pki: Pki, **kv: str):
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem")}
    base.update({k.replace("_", "."): v for k, v in kv.items()})
    return build_listener_tls(listener_ssl_props(lambda k: base.get(k, ""), "SSL", "SSL"), "SSL")


def test_context_settings(pki):
    t = _tls(pki)
    assert t.context.verify_mode == ssl.CERT_NONE
    assert t.context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert t.context.maximum_version == ssl.TLSVersion.TLSv1_3
    t = _tls(pki, ssl_client_auth="requested", ssl_truststore_type="PKCS12",
             ssl_truststore_location=pki.path("truststore.p12"), ssl_truststore_password=PASSWORD)
    assert t.context.verify_mode == ssl.CERT_OPTIONAL
    t = _tls(pki, ssl_enabled_protocols="TLSv1.3")
    assert t.context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_cipher_suites_by_java_names(pki):
    t = _tls(pki, ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
    names = {c["name"] for c in t.context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES128-GCM-SHA256"}
    assert t.context.maximum_version == ssl.TLSVersion.TLSv1_2  # no TLS 1.3 suite listed: as Java
    t = _tls(pki, ssl_cipher_suites="TLS_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
    assert t.context.maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match="unknown or unsupported cipher suite TLS_NOPE"):
        _tls(pki, ssl_cipher_suites="TLS_NOPE")


def test_pkcs12_keystore_as_jks_type_is_read(pki):
    """Kafka's default keystore type JKS: Java reads a PKCS12 file under it, so do we."""
    t = _tls(pki, ssl_keystore_type="JKS", ssl_keystore_location=pki.path("server.p12"),
             ssl_keystore_password=PASSWORD)
    assert t.client_auth == "none"


def test_inline_truststore_and_exclusive_keys(pki):
    ca = (pki.root / "ca.pem").read_text()
    t = _tls(pki, ssl_client_auth="required", ssl_truststore_type="PEM", ssl_truststore_certificates=ca)
    assert t.context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ConfigError, match="Both SSL trust store location and separate trust certificates"):
        _tls(pki, ssl_client_auth="required", ssl_truststore_type="PEM", ssl_truststore_certificates=ca,
             ssl_truststore_location=pki.path("ca.pem"))
    with pytest.raises(ConfigError, match="SSL certificate chain is specified, but private key is not specified"):
        _tls(pki, ssl_keystore_certificate_chain=ca)
