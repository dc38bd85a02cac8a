"""Text as every stage reads it: hygiene (:func:`clean_text`, :func:`fold_accents`, :func:`natural_key`),
sentence spans (:func:`split_sentences`) and word tokens (:class:`Tokenizer`). Ingest, retrieval,
context and the answerers share these, so a sentence or a token means the same thing everywhere."""

from liminalis.text.hygiene import clean_text, fold_accents, natural_key
from liminalis.text.sentences import ABBREVIATIONS, SentenceSpan, split_sentences
from liminalis.text.tokens import STOP_WORDS, TOKENIZER_VERSION, Tokenizer

__all__ = [
    "ABBREVIATIONS",
    "STOP_WORDS",
    "TOKENIZER_VERSION",
    "SentenceSpan",
    "Tokenizer",
    "clean_text",
    "fold_accents",
    "natural_key",
    "split_sentences",
]
