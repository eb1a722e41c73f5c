"""Topic regular expressions of consumer groups (SubscribedTopicRegex), compiled with RE2 as Kafka
does with RE2J: linear-time matching, so no client regex can stall the event loop, and the same
syntax and error descriptions as Kafka. A topic matches when the whole name matches."""
from __future__ import annotations

import logging
from typing import Callable

log = logging.getLogger(__name__)

# RE2 (C++) error text -> RE2J's description, which Kafka puts in its error message
_RE2J_DESCRIPTIONS = (
    ("missing ]", "missing closing ]"),
    ("missing )", "missing closing )"),
    ("unexpected )", "unexpected )"),
    ("missing argument to repetition operator", "missing argument to repetition operator"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("invalid repetition size", "invalid repeat count"),
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("invalid named capture group", "invalid named capture"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("invalid UTF-8", "invalid UTF-8"),
)


class InvalidRegex(ValueError):
    """The pattern does not compile; the message is the description Kafka reports."""


try:
    import re2 as _re2

    _OPTIONS = _re2.Options()
    _OPTIONS.log_errors = False

    def _compile(pattern: str) -> Callable[[str], bool]:
        try:
            compiled = _re2.compile(pattern, _OPTIONS)
        except _re2.error as exc:
            text = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) \
                else str(exc)
            for prefix, description in _RE2J_DESCRIPTIONS:
                if text.startswith(prefix):
                    raise InvalidRegex(description) from None
            raise InvalidRegex(text.split(":")[0]) from None
        return lambda name: compiled.fullmatch(name) is not None
except ImportError:  # pragma: no cover - google-re2 is a dependency; Python's re keeps tests running
    import re as _re

    log.warning("google-re2 is not installed: topic regexes use Python's backtracking re")

    def _compile(pattern: str) -> Callable[[str], bool]:
        try:
            compiled = _re.compile(pattern)
        except _re.error as exc:
            raise InvalidRegex(str(exc)) from None
        return lambda name: compiled.fullmatch(name) is not None


def compile_topic_regex(pattern: str) -> Callable[[str], bool]:
    """A predicate `topic name -> matches`; raises InvalidRegex."""
    return _compile(pattern)
