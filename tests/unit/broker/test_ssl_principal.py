"""ssl.principal.mapping.rules: Kafka's SslPrincipalMapperTest cases, ported; RFC 2253 names."""
from __future__ import annotations

import pytest

from minikafka.broker.security.ssl_principal import NoMatchingRule, SslPrincipalMapper


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules):
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)


def test_mapping():
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize("expected, rules", [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected, rules):
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_literal_back_references_and_no_match():
    mapper = SslPrincipalMapper("RULE:^CN=([a-z]+),(.*)$/$1@$3/")  # $3 names no group: literal
    assert mapper.name("CN=bob,O=x") == "bob@$3"
    with pytest.raises(NoMatchingRule):
        mapper.name("OU=only")
    assert SslPrincipalMapper(None).name("CN=a") == "CN=a"


# -- RFC 2253 names, checked against Java's X500Principal.getName() ----------------------------

_SUBJECTS = [  # most specific first, as RFC 2253 prints them (certificates hold the reverse order)
    [("CN", "alice"), ("OU", "eng"), ("O", "acme")],
    [("CN", "Duke <x>;\"q\"\\"), ("OU", "a+b=c"), ("O", "Sun, Inc."), ("L", "Fulton"), ("ST", "MD"), ("C", "US")],
    [("CN", " lead and trail "), ("O", "#hash")],
    [("DC", "com"), ("DC", "example"), ("UID", "u1"), ("CN", "ünïcode name")],
    [("EMAIL", "alice@example.com"), ("CN", "alice"), ("SERIAL", "1234"), ("STREET", "1 Main St")],
]


def _cert(subject, key):
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
            "C": NameOID.COUNTRY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "L": NameOID.LOCALITY_NAME,
            "DC": NameOID.DOMAIN_COMPONENT, "UID": NameOID.USER_ID, "EMAIL": NameOID.EMAIL_ADDRESS,
            "SERIAL": NameOID.SERIAL_NUMBER, "STREET": NameOID.STREET_ADDRESS}
    name = x509.Name([x509.NameAttribute(oids[k], v) for k, v in reversed(subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))


def test_rfc2253_names_as_java_prints_them(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from minikafka.broker.security.ssl_principal import rfc2253_name
    key = ec.generate_private_key(ec.SECP256R1())
    certs = [_cert(s, key) for s in _SUBJECTS]
    ours = [rfc2253_name(c.public_bytes(serialization.Encoding.DER)) for c in certs]
    assert ours[0] == "CN=alice,OU=eng,O=acme"
    assert ours[1] == 'CN=Duke \\<x\\>\\;\\"q\\"\\\\,OU=a\\+b\\=c,O=Sun\\, Inc.,L=Fulton,ST=MD,C=US'
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from scripts.apache_kafka import java_bin  # the JDK the oracle and the Java-client tests use
    java = java_bin()
    paths = []
    for i, c in enumerate(certs):
        p = tmp_path / f"c{i}.pem"
        p.write_bytes(c.public_bytes(serialization.Encoding.PEM))
        paths.append(str(p))
    src = Path(__file__).parent / "java" / "DnNames.java"
    out = subprocess.run([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", str(src), *paths],
                         capture_output=True, check=True, timeout=60)
    assert out.stdout.decode("utf-8").splitlines() == ours
