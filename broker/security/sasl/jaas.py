"""Kafka's JAAS config syntax (`sasl.jaas.config` values), parsed as Kafka's JaasConfig does with
java.io.StreamTokenizer:

    <LoginModuleClass> <controlFlag> (<option>=<value>)* ; [more entries]

Values are words or quoted strings ('"' or "'", with Java escapes); `//` and `/* */` comments are
skipped. As in Kafka, an unquoted value that starts like a number (digit, '.', '-') is refused
("Value not specified"), as is an entry without its terminating ';'.
"""
from __future__ import annotations

from dataclasses import dataclass, field

CONTROL_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


class JaasConfigError(ValueError):
    """The JAAS config text cannot be parsed (Kafka refuses it at start-up)."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


_WORD, _NUMBER, _QUOTED, _CHAR = range(4)
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


def _is_word_char(ch: str) -> bool:
    return ch.isalpha() or ch.isdigit() or ch in "._-$" or ord(ch) >= 0xA0


def _tokens(text: str):
    """(kind, value) tokens as StreamTokenizer with Kafka's settings yields them."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace() or ord(ch) < 0x20:
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] not in "\r\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in "\"'":
            quote, i, out = ch, i + 1, []
            while i < n and text[i] != quote and text[i] not in "\r\n":
                c = text[i]
                if c == "\\" and i + 1 < n:
                    i += 1
                    c = text[i]
                    if c in "01234567":
                        j = i
                        while j < n and j < i + 3 and text[j] in "01234567":
                            j += 1
                        out.append(chr(int(text[i:j], 8) & 0xFF))
                        i = j
                        continue
                    c = _ESCAPES.get(c, c)
                out.append(c)
                i += 1
            i += 1  # the closing quote (or end of line/text, as StreamTokenizer)
            yield _QUOTED, "".join(out)
        elif ch.isdigit() or ch == "." or (ch == "-" and i + 1 < n and (text[i + 1].isdigit() or text[i + 1] == ".")):
            j = i + 1
            while j < n and (text[j].isdigit() or text[j] == "."):
                j += 1
            yield _NUMBER, text[i:j]
            i = j
        elif _is_word_char(ch) and ch != "-":
            j = i + 1
            while j < n and _is_word_char(text[j]):
                j += 1
            yield _WORD, text[i:j]
            i = j
        else:
            yield _CHAR, ch
            i += 1


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """The login module entries of a `sasl.jaas.config` value; JaasConfigError when Kafka would refuse it."""
    tokens = list(_tokens(text))
    entries: list[JaasEntry] = []
    pos = 0

    def take():
        nonlocal pos
        tok = tokens[pos] if pos < len(tokens) else None
        pos += 1
        return tok

    while pos < len(tokens):
        module = take()
        if module[0] not in (_WORD, _QUOTED):
            raise JaasConfigError(f"Login module not specified in JAAS config (got {module[1]!r})")
        flag = take()
        if flag is None:
            raise JaasConfigError("Login module control flag not specified in JAAS config")
        if flag[0] not in (_WORD, _QUOTED) or flag[1].upper() not in CONTROL_FLAGS:
            raise JaasConfigError(f"Invalid login module control flag '{flag[1]}' in JAAS config")
        options: dict[str, str] = {}
        while True:
            tok = take()
            if tok is None or tok == (_CHAR, ";"):
                break
            key = tok[1]
            eq, value = take(), take()
            if eq != (_CHAR, "=") or value is None or value[0] not in (_WORD, _QUOTED):
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = value[1]
        if tok is None:
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(module[1], flag[1].upper(), options))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def plain_users(entries: list[JaasEntry]) -> dict[str, str]:
    """PLAIN's users (`user_<name>="<password>"` options of PlainLoginModule entries), as Kafka's
    PlainServerCallbackHandler reads them."""
    users: dict[str, str] = {}
    for entry in entries:
        if entry.login_module == PLAIN_LOGIN_MODULE:
            for key, value in entry.options.items():
                if key.startswith("user_"):
                    users.setdefault(key[len("user_"):], value)
    return users
