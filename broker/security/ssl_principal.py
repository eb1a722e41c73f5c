"""The principal of a TLS client certificate, as Kafka's DefaultKafkaPrincipalBuilder derives it.

Kafka takes the peer certificate's subject as `javax.security.auth.x500.X500Principal.getName()`
prints it (RFC 2253: RDNs most specific first, e.g. `CN=alice,OU=eng,O=acme`), runs it through
`ssl.principal.mapping.rules` (SslPrincipalMapper: `RULE:pattern/replacement/[LU]` and `DEFAULT`,
first rule that matches wins) and makes `User:<name>` of the result. No client certificate:
`User:ANONYMOUS`.

`rfc2253_name` reproduces Java's formatting: the keywords CN, C, L, ST, O, OU, STREET, DC, UID;
any other attribute as its dotted OID with the value as `#` + hex of its DER encoding (also for
string types Java does not print as text); the characters `,=+<>#;"\\` escaped with a backslash,
NUL as `\\00`, leading and trailing spaces escaped; multi-valued RDNs joined by `+`.

`SslPrincipalMapper` ports Kafka's rule splitter and parser (same regular expressions) and Java's
`String.replaceAll` replacement syntax (`$n`, `${name}`, `\\x`). Patterns are Python `re` patterns;
the Java syntax that differs (`(?<name>...)`) is translated.
"""
from __future__ import annotations

import re
from typing import Any

ANONYMOUS = "User:ANONYMOUS"

# Java's AVAKeyword table, the entries marked RFC 2253 compliant
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DerValue.isDerString(tag, canonical=false): string types Java prints as text
_TEXT_TAGS = {12, 19, 20, 22, 27, 30}  # UTF8, Printable, T61, IA5, General, BMP
_ENCODINGS = {12: "utf-8", 30: "utf-16-be", 28: "utf-32-be", 20: "latin-1"}
_ESCAPEES = ',=+<>#;"\\'


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _attribute_rfc2253(oid: str, value: Any, tag: int) -> str:
    keyword = _RFC2253_KEYWORDS.get(oid)
    if keyword is None or tag not in _TEXT_TAGS or not isinstance(value, str):
        if isinstance(value, str):
            content = value.encode(_ENCODINGS.get(tag, "ascii"), errors="replace")
        else:
            content = bytes(value)
        der = bytes([tag]) + _der_length(len(content)) + content
        return f"{keyword or oid}=#{der.hex()}"
    out = []
    for ch in value:
        if ch in _ESCAPEES:
            out.append("\\" + ch)
        elif ch == "\0":
            out.append("\\00")
        else:
            out.append(ch)
    chars = list("".join(out))
    lead = 0
    while lead < len(chars) and chars[lead] in " \r":
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in " \r":
        trail -= 1
    text = "".join(("\\" + c) if (i < lead or i > trail) else c for i, c in enumerate(chars))
    return f"{keyword}={text}"


def _asn1_tag(attribute: Any) -> int:
    """The ASN.1 string type of a name attribute (cryptography keeps it in `_type`; UTF8String if not)."""
    kind = getattr(attribute, "_type", None)
    return int(getattr(kind, "value", 12))


def rfc2253_name(der_certificate: bytes) -> str:
    """The subject of a DER certificate as Java's X500Principal.getName() (RFC 2253) prints it."""
    from cryptography import x509
    cert = x509.load_der_x509_certificate(der_certificate)
    rdns = []
    for rdn in reversed(list(cert.subject.rdns)):
        rdns.append("+".join(_attribute_rfc2253(a.oid.dotted_string, a.value, _asn1_tag(a)) for a in rdn))
    return ",".join(rdns)


# -- ssl.principal.mapping.rules ----------------------------------------------------------------

_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No rule of ssl.principal.mapping.rules applies to a distinguished name."""


def _java_find_all(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Java's `while (matcher.find())`: the next search starts where the last match ended, one
    character further after an empty match."""
    out, pos = [], 0
    while pos <= len(text):
        m = pattern.search(text, pos)
        if m is None:
            break
        out.append(m)
        pos = m.end() + 1 if m.end() == m.start() else m.end()
    return out


def _java_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", pattern))


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str | None = None,
                 lower: bool = False, upper: bool = False) -> None:
        self.is_default = pattern is None
        self.source = pattern
        self.pattern = _java_regex(pattern) if pattern is not None else None
        self.replacement = replacement
        self.lower, self.upper = lower, upper

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        repl = _escape_literal_back_references(self.replacement or "", groups)
        result = self.pattern.sub(lambda m: _java_replacement(repl, m), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        text = "RULE:" + (self.source or "")
        if self.replacement is not None:
            text += "/" + self.replacement
        if self.lower:
            text += "/L"
        elif self.upper:
            text += "/U"
        return text


def _escape_literal_back_references(value: str, groups: int) -> str:
    """Kafka (from NiFi): a `$n` naming no capturing group is a literal `$n`."""
    if groups == 0:
        return value
    pos = 0
    while True:
        m = _BACK_REFERENCE.search(value, pos)
        if m is None:
            return value
        pos = m.end()
        num = m.group(1)
        if num.startswith("0"):
            continue
        index = int(num)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = m.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
            pos = m.end() + 1


def _java_replacement(repl: str, m: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement: `\\x` is x, `$n` the longest group number that exists,
    `${name}` a named group; a group that did not take part adds nothing."""
    out, i, groups = [], 0, m.re.groups
    while i < len(repl):
        ch = repl[i]
        if ch == "\\":
            i += 1
            if i >= len(repl):
                raise ValueError("character to be escaped is missing")
            out.append(repl[i])
            i += 1
        elif ch == "$":
            i += 1
            if i >= len(repl):
                raise ValueError("Illegal group reference: group index is missing")
            if repl[i] == "{":
                end = repl.find("}", i)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                out.append(m.group(repl[i + 1:end]) or "")
                i = end + 1
                continue
            if not repl[i].isdigit():
                raise ValueError("Illegal group reference")
            ref = int(repl[i])
            i += 1
            while i < len(repl) and repl[i].isdigit() and ref * 10 + int(repl[i]) <= groups:
                ref = ref * 10 + int(repl[i])
                i += 1
            if ref > groups:
                raise ValueError(f"No group {ref}")
            out.append(m.group(ref) or "")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """Kafka's `ssl.principal.mapping.rules` (an invalid rule raises ValueError, as Kafka refuses it
    at start-up)."""

    def __init__(self, rules: str | None) -> None:
        text = "DEFAULT" if rules is None else rules
        self.rules: list[_Rule] = []
        for m in _java_find_all(_RULE_SPLITTER, text.strip()):
            rule = m.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None:
                raise ValueError(f"Invalid rule: {rule}")
            if parsed.end() != len(rule):
                raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[parsed.end():]}`")
            if parsed.group(1) is not None:
                self.rules.append(_Rule())
            elif parsed.group(2) is not None:
                try:
                    self.rules.append(_Rule(parsed.group(2), parsed.group(4),
                                            parsed.group(6) == "L", parsed.group(6) == "U"))
                except re.error as exc:
                    raise ValueError(f"Invalid rule: {rule}: {exc}") from None

    def name(self, dn: str) -> str:
        """The short name of `dn`; NoMatchingRule when no rule applies (Kafka fails the connection)."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


def principal_of(der_certificate: bytes | None, mapper: SslPrincipalMapper) -> str:
    """`User:<mapped name>` of a peer certificate, `User:ANONYMOUS` without one."""
    if not der_certificate:
        return ANONYMOUS
    return "User:" + mapper.name(rfc2253_name(der_certificate))
