"""Text hygiene for anything a user or a file hands the engine, and accent folding.

Why one module: Python strings can hold what no downstream consumer accepts. A platform's JSON
may carry a lone surrogate (``"\\ud800"`` decodes to one), which the fast tokenizers reject
("TextInputSequence must be str") and SQLite cannot encode; control characters confuse
tokenizers and terminals. Cleaning once where text enters (an ingested file, a chat message)
keeps every later stage free of the question.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["clean_text", "fold_accents", "natural_key"]

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_DIGIT_RUNS = re.compile(r"(\d+)")


def clean_text(text: str) -> str:
    """NFC, ``\\n`` line ends, lone surrogates replaced by U+FFFD, control characters (but tab and
    newline) and byte-order marks gone. Idempotent; does not strip or re-wrap."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufeff", "")
    if _has_surrogate(text):  # a split pair is joined; a lone half becomes one U+FFFD
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _CONTROL.sub("", unicodedata.normalize("NFC", text))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def natural_key(name: str) -> list[tuple[int, int, str]]:
    """Sort key that orders the digit runs of a name by value: session-9 before session-10."""
    return [(0, int(x), "") if x.isdecimal() else (1, 0, x) for x in _DIGIT_RUNS.split(name)]


def fold_accents(text: str) -> str:
    """Compatibility-decompose and drop combining marks: ``Séverine`` → ``Severine``, ``ﬁ`` →
    ``fi``. Lexical search, document keys and name matching fold alike, so a player who types
    no accents finds what the GM wrote with them. ASCII text is its own folding (most of every
    campaign): returned as is, without the per-character walk."""
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
