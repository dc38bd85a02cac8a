"""GM intent in a GM's own words: the vocabulary that marks text as GM-only, and where it counts.

GMs do not write a product's syntax. They write ``## GM Notes``, ``**DM:** …``, ``(GM: …)``,
keep a ``DM/`` folder, set ``publish: false`` or ``tags: [gm]``. This module is the one
vocabulary the loader (:mod:`liminalis.ingest.loaders`) and the section finder
(:mod:`liminalis.ingest.sections`) read those habits with. The rule is default-deny: whatever
names GM intent is GM-only until the GM says otherwise (the review queue).

Precision is the other half. A *name* (a title, a heading, a folder, a file name, a line's
``label:``) states GM intent only when it is about GM-ness and nothing else:

    intent(name) ⇔ (∃ t ∈ tokens: strong(t) ∨ (weak(t) ∧ ∃ u: marker(u)))
                   ∧ ∀ t ∈ tokens: term(t) ∨ filler(t)

so ``GM Notes``, ``Secrets``, ``For the DM``, ``Notes du MJ`` and ``Private notes`` name it,
while ``The Secret Garden``, ``A private room`` and ``Keeper`` (a weak word alone, as a
character's name would be) do not. A term set apart as a mark — ``(GM)``, ``[secret]``,
``Plans — GM``, ``GM: Plans`` — names it whatever else the title says.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Intent",
    "STRONG",
    "WEAK",
    "name_intent",
    "label_intent",
    "path_intent",
    "meta_intent",
    "tag_intent",
    "mark_intent",
    "kind_intent",
    "header_intent",
    "role_label",
    "speech_label",
    "roster_value",
    "property_key",
    "body_properties",
    "property_intent",
    "confusable_fold",
    "strip_ignorable",
    "colon_fold",
    "ROLE",
]

#: The words that name the GM's *role* (not a secret): a heading may be about the role as a
#: topic, as a rulebook's chapter is.
ROLE = frozenset(
    {
        "gm",
        "gms",
        "dm",
        "dms",
        "gamemaster",
        "game_master",
        "dungeon_master",
        "dungeonmaster",
        "mj",
        "mjs",
        "maitre_du_jeu",
        "meneur",
        "meneuse",
        "sl",
        "spielleiter",
        "spielleiterin",
        "spielleitung",
        "meister",
        "dj",
        "director_de_juego",
        "directora_de_juego",
        "mestre",
        "mestra",
    }
)

#: Words that name the GM (:data:`ROLE`) or a secret on their own, in English, French, German,
#: Spanish and Portuguese. Multi-word forms are joined with ``_`` before matching (see
#: :data:`_PHRASES`).
STRONG = ROLE | frozenset(
    {
        "secret",
        "secrets",
        "spoiler",
        "spoilers",
        "gm_only",
        "dm_only",
        "gmonly",
        "dmonly",
        "not_for_players",
        "players_dont_know",
        "behind_the_screen",
        "narrator_only",
        "eyes_only",
        "gm_knows",
        # French
        "secrete",
        "secretes",
        # German
        "geheim",
        "geheimnis",
        "geheimnisse",
        "geheimes",
        "spielleiterinfo",
        "spielleiterhinweise",
        "spielleiterinformationen",
        "meisterinfo",
        "meisterinfos",
        "meisterinformationen",
        # Spanish
        "secreto",
        "secretos",
        "secreta",
        "secretas",
        # Portuguese
        "segredo",
        "segredos",
        "narrador_apenas",
    }
)

#: Words that name GM intent only beside a marker word (``Private notes``, ``Keeper only``): alone
#: they are as often a place's, a room's or a character's name.
WEAK = frozenset(
    {
        "keeper",
        "keepers",
        "referee",
        "storyteller",
        "narrator",
        "hidden",
        "private",
        "prep",
        "master",
        "maestro",
        "narrador",
        "narradora",
        "cache",
        "caches",
        "prive",
        "privee",
        "versteckt",
        "privat",
        "oculto",
        "oculta",
        "privado",
        "privada",
        "confidential",
        "classified",
        "restricted",
        "reveal",
        "reveals",
    }
)

#: Words that turn a weak word into a mark: ``Private notes``, ``Keeper's eyes``, ``Hidden info``.
MARKERS = frozenset(
    {
        "notes",
        "note",
        "only",
        "info",
        "information",
        "eyes",
        "stuff",
        "section",
        "material",
        "materials",
        "prep",
        "notizen",
        "notas",
        "nota",
        "nur",
        "solo",
        "apenas",
        "so",
        "seulement",
        "uniquement",
        "reserve",
        "reservado",
        "intel",
    }
)

#: Words that make a name the GM's own place for notes, never a topic about the role: ``The DM's
#: Corner``, ``The Game Master's Notebook``.
_OWNED = frozenset({"corner", "notebook", "desk", "journal"})

#: Words that may stand beside a term without making the name about something else.
FILLER = (
    MARKERS
    | _OWNED
    | frozenset(
        {
            "the",
            "a",
            "an",
            "for",
            "of",
            "to",
            "and",
            "or",
            "my",
            "our",
            "her",
            "his",
            "their",
            "its",
            "your",
            "this",
            "these",
            "here",
            "below",
            "from",
            "by",
            "in",
            "on",
            "with",
            "about",
            "what",
            "who",
            "why",
            "how",
            "session",
            "sessions",
            "campaign",
            "details",
            "detail",
            "hint",
            "tip",
            "reminder",
            "reminders",
            "clue",
            "clues",
            "says",
            "lazy",
            "box",
            "click",
            "alert",
            "warning",
            "inside",
            "infos",
            "hinweise",
            "informationen",
            "informacion",
            "informacoes",
            "anotacoes",
            "jeu",
            "jogo",
            "juego",
            "plans",
            "plan",
            "planning",
            "preparation",
            "ideas",
            "idea",
            "tips",
            "hints",
            "reference",
            "screen",
            "truth",
            "true",
            "real",
            "story",
            "twist",
            "twists",
            "agenda",
            "motives",
            "misc",
            "folder",
            "files",
            "docs",
            "pages",
            "page",
            "content",
            "text",
            "aside",
            "asides",
            "mode",
            "use",
            "read",
            "players",
            "player",
            "know",
            "knows",
            "dont",
            "do",
            "not",
            "never",
            "tell",
            "reveal",
            "reveals",
            "revealed",
            "background",
            "facts",
            "lore",
            "world",
            "npc",
            "npcs",
            "extra",
            "more",
            "additional",
            "private",
            "hidden",
            "part",
            "chapter",
            "appendix",
            "ch",
            "pt",
            "vol",
            "act",
            "scene",
            # French, German, Spanish, Portuguese fillers
            "du",
            "de",
            "des",
            "le",
            "la",
            "les",
            "pour",
            "au",
            "aux",
            "et",
            "der",
            "die",
            "das",
            "den",
            "fur",
            "und",
            "zum",
            "zur",
            "el",
            "los",
            "las",
            "del",
            "para",
            "y",
            "da",
            "dos",
            "o",
            "os",
            "e",
            "sessao",
            "sesion",
            "seance",
            "sitzung",
        }
    )
)

#: Multi-word forms, matched on the normalized token string and joined into one token.
_PHRASES = (
    ("game master", "game_master"),
    ("games master", "game_master"),
    ("dungeon master", "dungeon_master"),
    ("dungeon masters", "dungeon_master"),
    ("game masters", "game_master"),
    ("para el master", "director_de_juego"),
    ("para la master", "director_de_juego"),
    ("not for players", "not_for_players"),
    ("not for the players", "not_for_players"),
    ("players dont know", "players_dont_know"),
    ("players do not know", "players_dont_know"),
    ("the players dont know", "players_dont_know"),
    ("behind the screen", "behind_the_screen"),
    ("narrator only", "narrator_only"),
    ("eyes only", "eyes_only"),
    ("do not share with players", "not_for_players"),
    ("do not share with the players", "not_for_players"),
    ("dont share with players", "not_for_players"),
    ("dont share with the players", "not_for_players"),
    ("do not share", "not_for_players"),
    ("dont share", "not_for_players"),
    ("what the gm knows", "gm_knows"),
    ("what the dm knows", "gm_knows"),
    ("what the gamemaster knows", "gm_knows"),
    ("what the game_master knows", "gm_knows"),
    ("gm only", "gm_only"),
    ("dm only", "dm_only"),
    ("maitre du jeu", "maitre_du_jeu"),
    ("maitresse du jeu", "maitre_du_jeu"),
    ("director de juego", "director_de_juego"),
    ("directora de juego", "directora_de_juego"),
    ("mestre do jogo", "mestre"),
    ("mestre de jogo", "mestre"),
)
_PHRASE_RES = tuple((re.compile(rf"(?<![\w]){a}(?![\w])"), b) for a, b in _PHRASES)

#: A term set off as a mark inside a longer name: ``(GM)``, ``[secret]``, ``{DM only}``.
_BRACKETED = re.compile(r"[(\[{<]\s*([^()\[\]{}<>]{1,40}?)\s*[)\]}>]")
#: A term at the start or end of a name, set off by a colon or a dash: ``GM: plans``,
#: ``Plans — GM``, ``Secret - the Duke``.
_LEAD = re.compile(r"^\s*([^:\-–—|]{1,40}?)\s*(?::|\s[-–—|]+\s|[–—|])")
_TRAIL = re.compile(r"(?:\s*[:|–—]\s*|\s-+\s*|\s*-+\s)([^:\-–—|]{1,40}?)\s*$")
#: What joins two names in one title: ``Secrets and Clues``, ``GM notes & hooks``.
_JOINS = re.compile(r"\s+(?:and|&|\+|vs\.?|versus|et|und|y|e)\s+|\s*[/&+]\s*", re.I)


@dataclass(frozen=True, slots=True)
class Intent:
    """Why a name, a path or a front matter was read as GM intent: the ``rule`` that fired and
    the words it fired on, for the ingest report and the review queue."""

    rule: str
    words: str


#: Letters of other scripts drawn like the Latin ones a GM word is spelt with (after lower
#: casing): a ``GМ`` with a Cyrillic ``М``, a Greek ``Μ``, a Cherokee ``Ꮐ`` reads as ``GM`` to
#: a player, so it must to the recogniser. A small table after Unicode's confusables (UTS #39),
#: limited to the letters the vocabulary uses; compatibility forms (fullwidth ``ＧＭ``, small
#: capitals' NFKC images) are folded by NFKC/NFKD first.
_CONFUSABLES = str.maketrans(
    {
        # Cyrillic
        "а": "a",
        "в": "b",
        "с": "c",
        "ԁ": "d",
        "е": "e",
        "ё": "e",
        "ԍ": "g",
        "һ": "h",
        "н": "h",
        "і": "i",
        "ј": "j",
        "к": "k",
        "ӏ": "l",
        "м": "m",
        "п": "n",
        "о": "o",
        "р": "p",
        "ԛ": "q",
        "г": "r",
        "ѕ": "s",
        "т": "t",
        "у": "y",
        "х": "x",
        # Greek
        "α": "a",
        "β": "b",
        "ε": "e",
        "ζ": "z",
        "η": "n",
        "ι": "i",
        "κ": "k",
        "μ": "m",
        "ν": "v",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "χ": "x",
        # Latin small capitals and script letters outside NFKC
        "ɡ": "g",
        "ɢ": "g",
        "ᴅ": "d",
        "ᴍ": "m",
        "ꜱ": "s",
        "ᴇ": "e",
        "ᴄ": "c",
        "ʀ": "r",
        "ᴛ": "t",
        "ᴏ": "o",
        "ᴘ": "p",
        # Cherokee capitals lower-case to their small forms
        "ꮐ": "g",
        "ꮇ": "m",
        "ꭰ": "d",
        "ꮪ": "s",
        "ꭼ": "e",
        "ꮯ": "c",
        "ꭱ": "r",
        "ꮦ": "t",
        "ᏻ": "g",
        "ꮥ": "s",
        "ꮢ": "r",
        "ꭲ": "t",
        # Lisu capitals, which have no lower case
        "ꓖ": "g",
        "ꓟ": "m",
        "ꓓ": "d",
        "ꓢ": "s",
        "ꓰ": "e",
        "ꓚ": "c",
        "ꓣ": "r",
        "ꓔ": "t",
        # Armenian, read before lower casing (``Տ`` lower-cases to ``տ``, no longer an S)
        "Տ": "s",
        "Ս": "u",
        "Օ": "o",
        "օ": "o",
        "ս": "u",
        "ց": "g",
        "հ": "h",
        "ո": "n",
        # More of the Latin look-alikes UTS #39 lists for G, M, D, S, E, C, R, T
        "ϻ": "m",
        "Ϻ": "m",
        "ϲ": "c",
        "Ϲ": "c",
        "ᗰ": "m",
        "ᗪ": "d",
        "ᗞ": "d",
        "ⴹ": "e",
        "ᖇ": "r",
        "Ʀ": "r",
        "ꓐ": "b",
    }
)

#: Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt): code points a
#: renderer draws as nothing, so ``G\ufe0fM`` (a variation selector) reads as ``GM`` to a player.
#: Python's :mod:`unicodedata` does not expose the property, hence the table.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


#: Characters drawn like a colon (UTS #39): the modifier-letter colon ``꞉`` a file-safe name
#: writes for ``:``, the fullwidth colon, the ratio sign, Armenian and Hebrew colons, the
#: triangular colons.
_COLONS = str.maketrans(
    dict.fromkeys("\ua789\uff1a\u2236\u02d0\u02f8\u0589\u05c3\ufe13\u1365", ":")
)


def colon_fold(text: str) -> str:
    """``text`` with every look-alike colon (:data:`_COLONS`) a ``:``, one character for one so
    every offset still points into the original: ``GM꞉ …`` is a label as ``GM: …`` is."""
    return text.translate(_COLONS)


#: A run a right-to-left override or isolate displays reversed, up to the control that ends it
#: or its line: ``\u202eMG\u202c`` is drawn ``GM``.
_RTL_RUN = re.compile("[\u202e\u2067](?P<run>[^\u202a-\u202e\u2066-\u2069\n]*)[\u202c\u2069]?")


def strip_ignorable(text: str) -> str:
    """``text`` as a player sees it drawn: a right-to-left run reversed (the order its letters
    are displayed in), then without its default-ignorable code points (:data:`_IGNORABLE`, the
    bidirectional controls among them)."""
    return _IGNORABLE.sub("", _RTL_RUN.sub(lambda m: m.group("run")[::-1], text))


def confusable_fold(text: str) -> str:
    """``text`` as drawn (:func:`strip_ignorable`), lower-cased, in NFKC, with look-alike letters
    of other scripts read as the Latin ones they imitate (:data:`_CONFUSABLES`, applied before
    and after lower casing): what a mark is matched on."""
    text = unicodedata.normalize("NFKC", strip_ignorable(text)).translate(_CONFUSABLES)
    return text.lower().translate(_CONFUSABLES)


def _fold(text: str) -> str:
    """Lower case, look-alike letters read as Latin (:func:`confusable_fold`), accents folded
    (``maître`` → ``maitre``, ``für`` → ``fur``), apostrophes dropped (``don't`` → ``dont``),
    everything else that is not a letter or digit a space."""
    text = re.sub(r"<[^<>]{0,80}>", " ", strip_ignorable(text))
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    # ``G.M.``, ``D. M.``: the abbreviation spelt with dots is the word.
    text = re.sub(r"(?<![\w.])([gdGD])\.[ ]?([mM])\.?(?![\w])", r"\1\2", text)
    text = unicodedata.normalize("NFKD", confusable_fold(text))
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = re.sub(r"[’'`´]", "", text)
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def _tokens(text: str) -> list[str]:
    folded = f" {_fold(text)} "
    for pattern, joined in _PHRASE_RES:
        folded = pattern.sub(joined, folded)
    # ``gm-only``, ``dm_notes``, ``GMNotes``: split a glued GM word off its marker.
    out: list[str] = []
    for tok in folded.split():
        m = re.fullmatch(r"(gm|dm|mj|sl)(notes?|only|info|prep|stuff)", tok)
        out += [m.group(1), m.group(2)] if m else [tok]
    return out


def _is_number(tok: str) -> bool:
    return bool(re.fullmatch(r"\d+[a-z]{0,2}|[a-z]{1,4}\d+|[ivxlc]{1,6}", tok))


def _whole(tokens: list[str]) -> str | None:
    """The term that makes ``tokens`` a name about GM intent, else ``None`` (module docstring)."""
    if not tokens:
        return None
    strong = [t for t in tokens if t in STRONG]
    weak = [t for t in tokens if t in WEAK]
    others = [
        t
        for t in tokens
        if t not in STRONG and t not in WEAK and t not in FILLER and not _is_number(t)
    ]
    if others:
        return None
    if strong:
        return strong[0]
    if weak and any(t in MARKERS and t != w for t in tokens for w in weak):
        return weak[0]
    return None


#: Articles that make a role word a noun phrase about the role: ``The Dungeon Master``.
_ARTICLES = frozenset({"the", "a", "an", "le", "la", "l", "der", "die", "el", "o", "um", "un"})
#: Words that address a name to the GM (``For the GM``) or make it theirs (``GM notes``): with one
#: of them the name is a mark, article or not.
_ADDRESSED = (
    MARKERS
    | _OWNED
    | frozenset({"for", "to", "pour", "fur", "para", "my", "our", "your", "his", "her", "their"})
)


def _topic(tokens: list[str]) -> bool:
    """Whether ``tokens`` name the GM's role as a topic, not a mark: every GM word is a role
    word, nothing addresses the text to the GM, and the role stands as a noun phrase — after an
    article (``The Dungeon Master``) or beside the players (``GM and Players``):

        topic(t) ⇔ {t} ∩ STRONG ⊆ ROLE ∧ {t} ∩ ADDRESSED = ∅
                   ∧ (∃ i: t[i] ∈ ROLE ∧ t[i-1] ∈ ARTICLES ∨ ∃ u ∈ t: u ∈ {player, players})

    ``The GM's Secrets`` (a secret word), ``For the GM`` and ``GM`` alone stay marks."""
    strong = [t for t in tokens if t in STRONG]
    if not strong or any(t not in ROLE for t in strong) or any(t in _ADDRESSED for t in tokens):
        return False
    after_article = any(
        t in ROLE and i > 0 and tokens[i - 1] in _ARTICLES for i, t in enumerate(tokens)
    )
    return after_article or any(t in {"player", "players"} for t in tokens)


def _named(text: str) -> str | None:
    """:func:`_whole` for a name, which may be about the role as a topic (:func:`_topic`)."""
    tokens = _tokens(text)
    return None if _topic(tokens) else _whole(tokens)


def name_intent(name: str) -> str | None:
    """The GM word a heading, callout title, folder or file name states GM intent with, else
    ``None``: the whole name is about GM-ness, or a strong term is set off as a mark in it. A
    name about the role as a topic (``The Dungeon Master``, ``GM and Players``) is none."""
    if not name or len(name) > 300:
        return None
    if _topic(_tokens(name)):
        return None
    found = _whole(_tokens(name))
    if found:
        return found
    parts = _JOINS.split(name)
    if len(parts) > 1:
        for part in parts:
            found = _named(part)
            if found:
                return found
    for m in _BRACKETED.finditer(name):
        found = _whole(_tokens(m.group(1)))
        if found:
            return found
    for pattern in (_LEAD, _TRAIL):
        part = pattern.search(name)
        if part:
            toks = _tokens(part.group(1))
            found = _whole(toks)
            if found and any(t in STRONG for t in toks):
                return found
    return None


def kind_intent(kind: str) -> str | None:
    """The GM word a block's *type* names (a callout's ``[!hidden]``, ``[!gm-notes]``), else
    ``None``: as a name (:func:`name_intent`), or a weak word alone, which as a type is a mark —
    a ``hidden`` callout is one the GM meant hidden, where ``Hidden`` alone as a title names a
    place."""
    tokens = _tokens(kind)
    if len(tokens) == 1 and tokens[0] in WEAK:
        return tokens[0]
    return name_intent(kind.replace("-", " "))


def header_intent(name: str) -> str | None:
    """The GM word a table's column header or row label names, else ``None``: a name or a label
    about GM-ness (``GM notes``), or a strong word anywhere in it (``Secret Motive``, a GM word
    as a modifier). A table cell is short and its column holds the same kind of thing all the
    way down, so the stricter whole-name rule would fail open."""
    if not name or len(name) > 60:
        return None
    found = name_intent(name) or label_intent(name)
    return found or next((t for t in _tokens(name) if t in STRONG), None)


def role_label(label: str) -> bool:
    """Whether a label names the GM's role and nothing else (``DM``, ``**GM**``, ``Dungeon
    Master``): a speaker's name in a transcript. ``GM note``, ``Secret`` are no role."""
    tokens = _tokens(label)
    return bool(tokens) and all(t in ROLE for t in tokens)


#: Keys of a stat block or a page's properties (``Race: Human``, ``HP: 12``): a ``Key: value``
#: line with one of them is a property, never a speaker's line in a transcript.
PROPERTY_KEYS = frozenset(
    {
        "race",
        "class",
        "age",
        "faction",
        "level",
        "hp",
        "ac",
        "alignment",
        "location",
        "type",
        "status",
        "role",
        "occupation",
        "title",
        "species",
        "gender",
        "sex",
        "pronouns",
        "height",
        "weight",
        "str",
        "dex",
        "con",
        "int",
        "wis",
        "cha",
        "speed",
        "cr",
        "xp",
        "size",
        "tags",
        "date",
        "session",
        "players",
        "party",
        "region",
        "home",
        "origin",
        "born",
        "died",
        "affiliation",
        "allegiance",
        "rank",
        "appearance",
        "personality",
        "motivation",
        "goal",
        "goals",
        "languages",
        "skills",
        "senses",
        "saves",
        "abilities",
        "attacks",
        "initiative",
        "visibility",
        "category",
        "name",
        "aliases",
        "alias",
        "owner",
        "ruler",
        "population",
        "government",
        "religion",
        "deity",
        "culture",
        "profession",
        "background",
        "hit points",
        "armor class",
        "armour class",
        "challenge",
        "damage",
        "weapon",
        "weapons",
        "items",
    }
)


def property_key(label: str) -> bool:
    """Whether a ``Key:`` label is a property of a stat block or a page (``Race``, ``Armor
    Class``), not a speaker's name: such lines never make a page a transcript."""
    return " ".join(_fold(label).split()) in PROPERTY_KEYS


#: Verbs that make ``The GM says:`` a sentence about the GM, not a label marking a note.
_SPEECH_VERBS = frozenset({"says", "said", "asks", "asked", "wants", "suggests", "reminds"})


def speech_label(label: str) -> bool:
    """Whether a ``Label:`` is a sentence's subject and verb (``The GM says``, ``Our DM asks``),
    not a mark: an article or possessive, the role, a speech verb, nothing else.

        speech(l) ⇔ l = d · r⁺ · v,  d ∈ ARTICLES ∪ {our, my, your}, r ∈ ROLE, v ∈ VERBS"""
    tokens = _tokens(label)
    return (
        len(tokens) >= 3
        and tokens[0] in _ARTICLES | {"our", "my", "your"}
        and tokens[-1] in _SPEECH_VERBS
        and all(t in ROLE for t in tokens[1:-1])
    )


#: A roster after a GM label: ``GM: Alice. Players: Bob, Carol`` names who plays, no secret.
_ROSTER = re.compile(
    r"^[ \t*_]*[A-Z][\w'’-]{1,30}(?:[ \t]+[A-Z][\w'’-]{1,30}){0,2}[.;,]?[ \t]+"
    r"(?:Players?|PCs?|Party|Table)[ \t*_]*:"
)


def roster_value(value: str) -> bool:
    """Whether a GM label's value is the table's roster (a capitalised name, then ``Players:``):
    who runs the game, not what the GM knows."""
    return bool(_ROSTER.match(value))


def mark_intent(label: str) -> str | None:
    """:func:`label_intent` for a label that may be prose about the role (``(the GM, …)`` in a
    rulebook's aside): a topic (:func:`_topic`) names no intent."""
    if not label or len(label) > 40:
        return None
    return _named(label)


def label_intent(label: str) -> str | None:
    """The GM word a line's label (the text before its colon: ``GM``, ``**DM note**``,
    ``Secret``) states GM intent with, else ``None``. Only the whole-label rule: a label is
    short, and ``Keeper`` alone is a speaker's name."""
    if not label or len(label) > 40:
        return None
    return _whole(_tokens(label))


#: Folder names a GM keeps prep in that say so without a GM word.
_PREP_FOLDERS = frozenset({"prep", "private", "hidden", "_private", "_hidden", ".private"})


def path_intent(rel_path: str) -> Intent | None:
    """GM intent in a file's path: a folder at any depth (``DM/``, ``GM Notes/``, ``_gm/``,
    ``Secrets/``, ``Private/``) or the file's own name (``gm-notes.md``, ``Session 3 - GM
    prep.md``)."""
    parts = [p for p in rel_path.replace("\\", "/").split("/") if p]
    if not parts:
        return None
    *folders, name = parts
    for folder in folders:
        if folder.lower().strip(" _.-") in _PREP_FOLDERS:
            return Intent("folder", folder)
        if name_intent(folder.strip(" _.-")) or _whole(_tokens(folder)) or _edge_term(folder):
            return Intent("folder", folder)
        # ``Private`` or ``Keeper`` alone as a folder name is a place to keep things, not a name.
        toks = _tokens(folder)
        if len(toks) == 1 and toks[0] in {"private", "hidden", "keeper", "referee"}:
            return Intent("folder", folder)
    stem = name.rsplit(".", 1)[0] if "." in name.strip(".") else name
    if name_intent(stem.replace("_", " ")) or _edge_term(stem):
        return Intent("file name", name)
    return None


#: Terms that mark a file or folder name from either end: ``gm-duke.md``, ``duke-gm.md``.
_EDGE_ABBREVIATIONS = frozenset({"gm", "dm", "mj", "sl", "gms", "dms"})
#: Terms that mark a name from its end: ``Duke-secret.md``, ``session-03-prep.md``.
_EDGE_TAIL = frozenset({"secrets", "spoilers", "prep", "gmnotes", "dmnotes"})


def _edge_term(name: str) -> bool:
    """``duke-aldric-gm``, ``GM_duke``, ``Duke SECRETS``, ``session-03-prep``: a GM word at an
    end of a name that says more. In the middle (``The Secret Garden``) it is a name's word."""
    toks = _tokens(name.replace("_", " ").replace(".", " "))
    if len(toks) < 2:
        return False
    last = toks[-1] if not _is_number(toks[-1]) or len(toks) < 3 else toks[-2]
    if toks[-1] in ("notes", "note") and len(toks) >= 3:
        last = toks[-2]
    return toks[0] in _EDGE_ABBREVIATIONS or last in _EDGE_ABBREVIATIONS | _EDGE_TAIL


def tag_intent(tag: str) -> str | None:
    """The GM word a tag or css class names: ``gm``, ``#secret``, ``gm-only``, ``status/secret``
    (each level of a nested tag read alone), else ``None``."""
    for level in str(tag).strip().lstrip("#").split("/"):
        found = label_intent(level.replace("-", " ").replace("_", " "))
        if found:
            return found
    return None


#: Front-matter flags that make a file GM-only when true (``gm: true``, ``spoiler: yes``).
FLAG_KEYS = frozenset(
    {
        "gm",
        "dm",
        "secret",
        "private",
        "hidden",
        "gmonly",
        "dmonly",
        "spoiler",
        "spoilers",
        "gmnotes",
        "dmnotes",
        "secrets",
        "geheim",
        "secreto",
        "segredo",
        "prive",
        "privat",
        "privado",
        "mjonly",
        "slonly",
        "mj",
        "sl",
    }
)
#: A flag's values that set it. An empty value (``secret:``) says nothing either way: a template's
#: unfilled field, left as the players' like any other page.
_TRUE = frozenset({"true", "yes", "y", "on", "1", "gm", "only", "gm only"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})
#: Keys whose falsy value keeps a file from its readers: Obsidian Publish, static site drafts.
_UNPUBLISH = {
    "publish": _FALSE,
    "published": _FALSE,
    "share": _FALSE,
    "shared": _FALSE,
    "public": _FALSE,
    "dgpublish": _FALSE,
    "revealed": _FALSE,
    "playervisible": _FALSE,
    "visibletoplayers": _FALSE,
    "playerfacing": _FALSE,
    "players": _FALSE,
}
_DRAFT = frozenset({"draft"})
#: Yes and no in the vocabulary's languages (accents folded), and the ticks a GM types for them.
_YES = frozenset(
    {"true", "yes", "y", "on", "1", "oui", "ja", "si", "sim", "vrai", "wahr", "verdadero"}
    | {"verdadeiro", "\u2713", "\u2714", "\u2611"}
)
_NO = frozenset(
    {"false", "no", "n", "off", "0", "non", "nein", "nao", "faux", "falsch", "falso"}
    | {"\u2717", "\u2718", "\u2610", "\u274c"}
)
#: What a flag's value says to mean unset: ``spoilers: none`` is a page with none.
_UNSET = frozenset({"none", "null", "nil", "~", "-", "n/a"})
#: What a key that lists who may read says to mean nobody: ``permissions: {players: none}``.
_NOBODY = frozenset({"none", "never", "nobody", "no one", "noone", "gm", "gm only", "hidden"})
#: Keys that list the players rather than switch: ``players: Alice, Bob`` names who played.
_ROSTER_KEYS = frozenset({"players"})
#: Role words as flag keys: ``gm: Alice`` names who ran the session, so only a yes sets them.
_ROLE_FLAG_KEYS = frozenset({"gm", "dm", "mj", "sl"})
_AUDIENCE_KEYS = frozenset({"visibility", "audience", "access", "readers", "visibleto"})
_TAG_KEYS = frozenset(
    {
        "tags",
        "tag",
        "cssclasses",
        "cssclass",
        "classes",
        "class",
        "status",
        "category",
        "categories",
        "keywords",
        "type",
    }
)
_PLAYER_WORDS = frozenset({"players", "player", "public", "all", "everyone", "party", "table"})


def _norm_key(key: object) -> str:
    return re.sub(r"[-_ ]", "", str(key).lower())


def _values(value: object) -> Iterable[object]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return (
            [x for v in value for x in _values(v)]
            if any(isinstance(v, (list, tuple)) for v in value)
            else value
        )
    if isinstance(value, str) and "," in value:
        return [v for v in value.split(",")]
    if isinstance(value, str):
        return value.split()
    return [value]


def _switch_word(value: object) -> str:
    """A switch's value as one word: lower case, accents folded (``não`` → ``nao``), ``""`` for
    none or an empty list."""
    if value is None or (isinstance(value, (list, tuple, Mapping)) and not value):
        return ""
    word = unicodedata.normalize("NFKD", str(value).strip().lower())
    return "".join(c for c in word if not unicodedata.combining(c))


def _flag_set(key: str, value: object) -> bool:
    """Whether a GM flag (``secret``, ``spoiler``, ``gm``) is set. It fails closed: any value
    but an empty one or a no (``secret: ✓``, ``secret: oui``, ``secret: maybe``) sets it, since
    a held file costs a review and a leaked one the campaign. A role word as a key (``gm:``) is
    set only by a yes: ``gm: Alice`` names who ran the session."""
    if isinstance(value, Mapping):
        return False
    word = _switch_word(value)
    if key in _ROLE_FLAG_KEYS:
        return word in _TRUE | _YES
    return bool(word) and word not in _NO | _UNSET


def _unpublished(key: str, value: object) -> bool:
    """Whether a publishing switch (``publish``, ``public``, ``revealed``, ``player_visible``)
    keeps the file from its readers. It fails closed: only a yes (or a date, a number: when it
    was published) leaves it open, so ``public: never`` holds. A roster key (``players:``) holds
    only on a no or a nobody (``permissions: {players: none}``)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (Mapping, list, tuple)):
        return False
    word = _switch_word(value)
    if word in _UNPUBLISH[key] or word in _NO or word in _NOBODY:
        return True
    if key in _ROSTER_KEYS or not word:
        return False
    return word not in _YES and not re.search(r"\d", word)


def meta_intent(meta: Mapping[Any, object], *, known_lenses: Iterable[str] = ()) -> Intent | None:
    """GM intent in front matter, at any nesting depth: a true flag (``secret: true``,
    ``dm_only: yes``), ``publish: false``, ``draft: true``, a tag or css class naming the
    vocabulary (``tags: [npc, gm]``), or a ``visibility``/``audience`` naming no player lens
    below the top level (``meta: {visibility: gm}``; the top-level ``visibility`` is read by
    :func:`liminalis.lens.parse_visibility`)."""
    lenses = {x.lower() for x in known_lenses}
    return _walk(meta, lenses, top=True, depth=0)


def _walk(meta: Mapping[Any, object], lenses: set[str], *, top: bool, depth: int) -> Intent | None:
    if depth > 20:
        return Intent("front matter", "nested too deep")
    for key, value in meta.items():
        k = _norm_key(key)
        if k in FLAG_KEYS and _flag_set(k, value):
            return Intent("front matter flag", f"{key}: {value}")
        if k in _UNPUBLISH and _unpublished(k, value):
            return Intent("front matter", f"{key}: {value}")
        if k in _DRAFT and (value is True or _switch_word(value) in _YES):
            return Intent("front matter", f"{key}: {value}")
        if k in _TAG_KEYS:
            for tag in _values(value):
                if isinstance(tag, (str, int)) and tag_intent(str(tag)):
                    return Intent("tag", f"{key}: {tag}")
        if (
            k in _AUDIENCE_KEYS
            and not (top and k == "visibility")
            and not isinstance(value, Mapping)
        ):
            words = {_fold(str(x)) for x in _values(value) if x is not None}
            if not words or any(w not in _PLAYER_WORDS | lenses for w in words):
                return Intent("front matter", f"{key}: {value}")
        if isinstance(value, Mapping):
            found = _walk(value, lenses, top=False, depth=depth + 1)
            if found:
                return found
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, Mapping):
                    found = _walk(item, lenses, top=False, depth=depth + 1)
                    if found:
                        return found
    return None


#: A Dataview inline field on a line of its own (``visibility:: gm``, ``- **Secret**:: true``)
#: or in brackets inside one (``[visibility:: gm]``, ``(GM:: …)``).
_INLINE_FIELD = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?[*_]*(?P<k>[^\W\d][\w -]{0,30}?)[*_]*[ \t]*::[ \t]*(?P<v>[^\n]*)$"
    r"|[\[(](?P<bk>[^\W\d][\w -]{0,30}?)[ \t]*::[ \t]*(?P<bv>[^\])\n]*)[\])]",
    re.M,
)
#: A property line of a Notion export (``Visibility: GM``), read only in the block of such lines
#: that opens a page (before its first heading, or right under its title).
_PROPERTY_LINE = re.compile(r"^[ \t]*(?P<k>[^\W\d][\w -]{0,30}?)[ \t]*:[ \t]+(?P<v>\S[^\n]*)$")
#: How many of a page's first lines a Notion property block may run over.
_PROPERTY_LINES = 30


def body_properties(text: str) -> dict[str, str]:
    """The page properties a body states in a tool's own syntax: every Dataview inline field,
    and the ``Key: value`` lines of a Notion export's property block (the run of such lines right
    under the ``# Title`` the page opens with). Later keys of the same name are kept apart
    (``visibility#2``)."""
    props: dict[str, str] = {}

    def keep(key: str, value: str) -> None:
        key = key.strip().strip("*_ ")
        name = key if key not in props else f"{key}#{len(props)}"
        props[name] = value.strip().strip("*_ ")

    for m in _INLINE_FIELD.finditer(text):
        keep(m.group("k") or m.group("bk") or "", m.group("v") or m.group("bv") or "")
    lines = text.split("\n")[:_PROPERTY_LINES]
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or not re.match(r"[ \t]{0,3}#[ \t]", lines[i]):
        # A Notion page opens with its title, its properties under it. ``visibility: gm`` lines
        # with no title above are a front matter written without its fences: the loader refuses
        # the file with a reason the GM can act on.
        return props
    i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    while i < len(lines) and (pm := _PROPERTY_LINE.match(lines[i])):
        keep(pm.group("k"), pm.group("v"))
        i += 1
    return props


#: A flag's values that set it in the body, where ``GM: yes`` is more often a transcript's line.
_BODY_TRUE = frozenset({"true", "yes", "y", "on", "1", "gm only"})
#: The flags read in a body: not ``hidden``/``private``, which a trap's stat block writes.
_BODY_FLAGS = frozenset(
    {"gm", "dm", "mj", "sl", "secret", "secrets", "gmonly", "dmonly", "spoiler", "spoilers"}
)
#: Role words as flags: ``GM: yes`` is a transcript's line, so only ``true`` sets them.
_ROLE_FLAGS = frozenset({"gm", "dm", "mj", "sl"})


def property_intent(props: Mapping[str, str]) -> Intent | None:
    """GM intent in body properties (:func:`body_properties`): an audience naming the GM
    (``visibility:: gm``, ``Visibility: GM only``: a value that is a GM word, not ``poor (fog)``),
    a set flag (``Secret:: true``; ``GM``/``DM`` only with ``true``), a tag naming the
    vocabulary, or ``publish:: false``."""
    for key, value in props.items():
        k, v = _norm_key(key.split("#", 1)[0]), value.strip().lower()
        if k in _AUDIENCE_KEYS and (label_intent(value) or tag_intent(value)):
            return Intent("page property", f"{key}: {value}"[:80])
        if k in _BODY_FLAGS and v in (_BODY_TRUE if k not in _ROLE_FLAGS else {"true"}):
            return Intent("page property", f"{key}: {value}"[:80])
        if k in _TAG_KEYS and any(tag_intent(t) for t in re.split(r"[\s,]+", value) if t):
            return Intent("page property", f"{key}: {value}"[:80])
        if k in _UNPUBLISH and v in _UNPUBLISH[k]:
            return Intent("page property", f"{key}: {value}"[:80])
    return None
