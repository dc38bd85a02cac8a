"""Word tokens for lexical search: case- and accent-folded, camel case and underscores split,
English stop words dropped, Snowball-stemmed (PyStemmer).

Ingest stores each passage's tokens and retrieval tokenizes questions with the same
:class:`Tokenizer`; :attr:`Tokenizer.tag` names the recipe, so stored tokens made by another
recipe are rebuilt rather than compared with tokens they do not match.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

import Stemmer  # PyStemmer: Snowball stemmers in C

from liminalis.text.hygiene import fold_accents

__all__ = ["Tokenizer", "STOP_WORDS", "TOKENIZER_VERSION"]

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves s t d ll m o re ve y""".split()
)

#: Bump when tokenization changes in a way the fields and the stop-word list do not show (the
#: regular expressions, folding, the stemmer): stored tokens from another version are rebuilt.
TOKENIZER_VERSION = 1
_STOP_HASH = hashlib.blake2b(" ".join(sorted(STOP_WORDS)).encode(), digest_size=3).hexdigest()

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_TOKEN = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=4)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """Case- and accent-folding tokenizer that splits camel case and underscores.

    ``14.9__What_The_Map_Omits`` → ``["14", "9", "map", "omit"]`` (stop words dropped, stemmed).
    """

    stem: bool = True
    stop_words: bool = True

    def __call__(self, text: str) -> list[str]:
        text = _CAMEL.sub(" ", fold_accents(text).replace("_", " "))
        tokens = _TOKEN.findall(text.lower())
        if self.stop_words:
            tokens = [t for t in tokens if t not in STOP_WORDS]
        if self.stem:
            tokens = _stemmer().stemWords(tokens)
        return tokens

    @property
    def tag(self) -> str:
        """What stored tokens were made with. Part of the index profile: a campaign tokenized with
        another tag is re-tokenized on its next ingest, since BM25 needs the query and the
        entries tokenized alike."""
        return f"tok{TOKENIZER_VERSION}:stem={int(self.stem)},stop={_STOP_HASH if self.stop_words else 0}"
