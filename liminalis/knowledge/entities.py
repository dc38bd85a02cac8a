"""Offline entity extraction per document view, and resolution at read time.

Extraction (:func:`extract_entities`) reads one view and nothing else, so its result can be
cached by the view's content hash and stored with the view's visibility:

* **front matter** — a view whose ``type`` names a kind of thing (:data:`ENTITY_TYPES` of
  :mod:`liminalis.memory.entities`) defines an entity under its title and ``aliases``;
* **mentions** — every capitalised name in the prose and headings
  (:func:`liminalis.memory.entities.name_spans`), with offsets, its passage, whether it opens a
  sentence, and a type hint from the words around it (a title like "Marshal", a head word like
  "Stairs" or "Guild", a verb of speech after it, "in"/"at" before it);
* **relations** — a small set of sentence patterns (:func:`extract_relations`).

Resolution (:class:`EntityIndex`) runs over the facts of the views a lens may see. A mention
resolves to one entity through, in order: a defined name or alias; the name without honorifics
("Brother Aldous" → "aldous"); a single word that is the first or last word of exactly one
multi-word entity ("Dunmore" → "Osric Dunmore"). A name no view defines becomes an entity when
it recurs, which for a name ``n`` with ``v(n)`` visible views and ``c(n)`` mentions not opening
a sentence is::

    recurring(n) = c(n) ≥ 1  ∧  (v(n) ≥ 2  ∨  (|words(n)| ≥ 2 ∧ m(n) + Σ_{w ∈ ends(n)} m(w) ≥ 2))

where ``m`` counts mentions and ``ends(n)`` are the first and last words of ``n`` that no
other multi-word name shares ("Corvina Coldwater" once, "Corvina" after it).

so a name met only in GM material (or a hidden section) never exists for a player.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from liminalis.knowledge.facts import EntityDef, Mention, RelationFact, ViewFacts
from liminalis.memory.entities import ENTITY_TYPES, HONORIFICS, name_spans
from liminalis.retrieval.catalog import normalize_key
from liminalis.text import split_sentences
from liminalis.types import Document

__all__ = [
    "CANONICAL_TYPES",
    "Entity",
    "EntityIndex",
    "canonical_type",
    "extract_entities",
    "extract_relations",
    "name_key",
]

_log = logging.getLogger(__name__)

#: Front-matter types folded to the types the layer reports.
CANONICAL_TYPES: dict[str, str] = {
    "character": "character",
    "npc": "character",
    "pc": "character",
    "person": "character",
    "place": "place",
    "location": "place",
    "city": "place",
    "region": "place",
    "faction": "faction",
    "organization": "faction",
    "organisation": "faction",
    "item": "item",
    "artifact": "item",
    "artefact": "item",
    "deity": "deity",
    "god": "deity",
    "creature": "creature",
    "monster": "creature",
    "event": "event",
    "quest": "event",
}

_PLACE_WORDS = frozenset(
    "street lane road stairs steps quarter turret abbey market channel stones hills coast ford "
    "foundry houses tower cradle river city village town gate gates hall inn tavern bridge "
    "square wharf docks harbour harbor keep castle temple chapel isle island forest wood woods "
    "mountains mountain valley sea lake marsh ward wards district".split()
)
_FACTION_WORDS = frozenset(
    "guild court watch council sisters brothers order brotherhood company gang circle cult "
    "clan house society league army".split()
)
_ITEM_WORDS = frozenset(
    "bell key chronicle mask pendant ledger sword ring book crown chair blade staff amulet "
    "tome map lantern".split()
)
_SPEECH = re.compile(
    r"\s*(?:said|says|asked|asks|told|tells|replied|whispered|shouted|smiled|laughed|nodded|"
    r"knew|knows|thinks|thought|refused|hums|carries|trusts|wants|went|gave|took|looked)\b"
)
_PLACE_BEFORE = re.compile(
    r"\b(?:in|at|into|across|near|inside|beneath|toward|towards)\s+(?:the\s+)?$"
)
_DATE_BEFORE = re.compile(r"\d\s*$")
_DATE_AFTER = re.compile(r"(?:,|\s+of)\s+\d")
#: Who plays: ``**Player:** Dana``, ``Present: Mirel Ashcombe (Dana)``, "Played by Dana".
_PLAYER = re.compile(
    r"\*\*Players?:?\*\*:?\s*([A-Z][\w'’-]+)|\(([A-Z][\w'’-]+)\)|[Pp]layed by ([A-Z][\w'’-]+)"
)
_OPENERS = "\"“‘'(*:—–"
_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_ARTICLE_TEXT = re.compile(r"^(?:the|a|an)\s+", re.I)
#: A metadata line (``**Played:** …``, ``Present: …``): its names are no part of the story.
_META_LINE = re.compile(r"^\s*\*\*[^*\n]{1,40}:?\*\*:?|^\s*[A-Z][\w -]{0,24}:\s")
#: Section headings that are never names.
_GENERIC_HEADINGS = frozenset(
    "recap summary notes events relations relationships abilities appearance manner layout people "
    "features dangers rumours rumors description structure interests menu rooms symbols "
    "activities leadership reputation premise practice limits encounters aftermath".split()
)


def name_key(text: str) -> str:
    """A name's key: normalised, without a leading article, possessive or honorific.

    "the Lantern Queen" → "lantern queen", "Mirel's" → "mirel", "Marshal Osric Dunmore" →
    "osric dunmore" (an honorific alone, "the Queen", stays "queen")."""
    text = _ARTICLE_TEXT.sub("", text.strip())
    # "Warden's Chair" is a chair, not a warden called Chair: a possessive title stays.
    titled = not re.match(r"\S+['’]s?\s", text)
    text = re.sub(r"(?:['’]s|['’])(?=\s|$)", "", text)
    words = _ARTICLE.sub("", normalize_key(text)).split()
    while titled and len(words) > 1 and words[0] in HONORIFICS:
        words = words[1:]
    return " ".join(words)


def canonical_type(doc_type: str) -> str | None:
    """The reported type of a front-matter type, or None when it defines no entity."""
    t = doc_type.strip().lower()
    return CANONICAL_TYPES.get(t) if t in ENTITY_TYPES else None


def _definition(doc: Document) -> EntityDef | None:
    kind = canonical_type(doc.type)
    if kind is None:
        return None
    title = re.sub(r"\s*\((?:\w+) only\)$", "", doc.title)  # a personal view's title mark
    # "Mirel Ashcombe — Private Backstory" is about Mirel, not a second entity: the head names it,
    # and the aliases ("Mirel's backstory") name the page, not her.
    m = re.match(r"(.+?)\s+[—–-]\s+\S", title)
    head = m.group(1) if m else title
    aliases = () if m else tuple(a for a in doc.aliases if name_key(a))
    key = name_key(head)
    return EntityDef(key, head.strip(), kind, aliases) if key else None


def _hint(text: str, start: int, end: int, surface: str) -> str:
    words = surface.lower().replace("’", "'").split()
    if words[0] in HONORIFICS and len(words) > 1 and words[0] not in {"saint", "st."}:
        return "character"
    last = words[-1].rstrip("'")
    if last in _PLACE_WORDS:
        return "place"
    if last in _FACTION_WORDS:
        return "faction"
    if last in _ITEM_WORDS:
        return "item"
    before = text[max(0, start - 24) : start]
    if _PLACE_BEFORE.search(before):
        return "place"
    if _SPEECH.match(text, end) or text.startswith(("'s", "’s"), end):
        return "character"
    if len(words) == 2 and not re.search(r"\bthe\s+$", before, re.I):
        return "character"
    return ""


def extract_entities(
    doc: Document, passages: Sequence[tuple[str, int, int]] = ()
) -> tuple[tuple[EntityDef, ...], tuple[Mention, ...]]:
    """The entity ``doc`` defines (if any) and every name it mentions, with offsets.

    Args:
        doc: one view of a file.
        passages: ``(passage_id, start, end)`` of the view's passages, to place each mention.
    """
    defined = _definition(doc)
    spans = sorted(passages, key=lambda p: p[1])
    starts = [p[1] for p in spans]
    text = doc.text
    sentence_starts = sorted({s for s, _, _ in split_sentences(text)})
    mentions: list[Mention] = []
    for line_start, line in _lines(text):
        for pm in _PLAYER.finditer(line):
            g = next(i for i in (1, 2, 3) if pm.group(i))
            mentions.append(
                Mention(
                    key=name_key(pm.group(g)),
                    surface=pm.group(g),
                    start=line_start + pm.start(g),
                    end=line_start + pm.end(g),
                    passage_id=_passage_at(spans, starts, line_start + pm.start(g)),
                    initial=True,
                    hint="player",
                )
            )
        if _META_LINE.match(line) and not line.lstrip().startswith("#"):
            continue
        if line.lstrip().startswith("|"):
            continue
        heading = line.lstrip().startswith("#")
        if heading and set(normalize_key(line.lstrip("# ")).split()) & _GENERIC_HEADINGS:
            continue
        for span in name_spans(line):
            start, end = line_start + span.start, line_start + span.end
            key = name_key(span.surface)
            if not key or len(key) < 2:
                continue
            i = bisect_right(sentence_starts, start) - 1
            opening = sentence_starts[i] if i >= 0 else 0
            before = text[opening:start].rstrip()
            initial = heading or not re.search(r"\w", before) or before.endswith(tuple(_OPENERS))
            dated = len(span.surface.split()) == 1 and bool(
                _DATE_BEFORE.search(text[max(0, start - 6) : start]) or _DATE_AFTER.match(text, end)
            )
            mentions.append(
                Mention(
                    key=key,
                    surface=span.surface,
                    start=start,
                    end=end,
                    passage_id=_passage_at(spans, starts, start),
                    initial=initial,
                    hint="date" if dated else _hint(text, start, end, span.surface),
                )
            )
    return ((defined,) if defined else ()), tuple(mentions)


def _passage_at(spans: Sequence[tuple[str, int, int]], starts: list[int], pos: int) -> str | None:
    j = bisect_right(starts, pos) - 1
    return spans[j][0] if j >= 0 and spans[j][1] <= pos < spans[j][2] else None


def _lines(text: str) -> Iterable[tuple[int, str]]:
    pos = 0
    for line in text.split("\n"):
        yield pos, line
        pos += len(line) + 1


# -- relations ---------------------------------------------------------------------------------

_KIN = (
    r"(daughter|son|child|mother|father|sister|brother|aunt|uncle|niece|nephew|grandmother|"
    r"grandfather|granddaughter|grandson|wife|husband)"
)
_PARENT_OF_CHILD = {"daughter", "son", "child"}
_CHILD_OF_PARENT = {"mother", "father"}
_GRAND = {"grandmother", "grandfather"}
_GRANDCHILD = {"granddaughter", "grandson"}
_SIBLING = {"sister", "brother"}
_LEADER_ROLES = frozenset(
    "ruler leader head commander master abbot abbess marshal captain queen king chief "
    "guildmaster".split()
)
_ALLY_WORDS = re.compile(
    r"\b(?:friend|friends|ally|allies|allied|alliance|trusts?|mentor|respect|likes|defend\w*|"
    r"loves?|protects?|employs?)\b",
    re.I,
)
# "distrusts" and "wary of" are not on the list: a character who distrusts another is no enemy
# of theirs, and a map that draws them as enemies tells the table something the notes do not.
_ENEMY_WORDS = re.compile(
    r"\b(?:enem(?:y|ies)|hostile|rivals?|war|hates?|hunts?|betray\w*)\b", re.I
)
#: The last word of "the X of Y" that makes X a person's place in Y; any other ("the ninth bell
#: of", "a copy of", "an old name in", "the second of") states no relation between the two names.
_PERSON_ROLES = _LEADER_ROLES | frozenset(
    "member keeper servant agent priest priestess monk nun knight guard soldier spy officer "
    "pupil student apprentice ringer bell-ringer inspector founder professor smith healer lady "
    "lord prince princess duke duchess count countess baron baroness envoy herald steward "
    "champion heir sergeant warden lamp-warden pilot".split()
)
#: Words between "in"/"at" and a place that show the second name is not where the first is
#: ("at the end of the Long Winter", "in her cellar when the Ashen Watch came").
_NOT_A_PLACE = frozenset(
    "of end beginning start middle night day days year years time winter summer spring autumn "
    "when while as and but because after before until where who which that than since if".split()
)
#: Particles a name may hold in lower case ("House of the Moon"); any other lower-case word in a
#: bold list label ("Masters, journeymen and apprentices") makes it a head count, not a name.
_NAME_PARTICLES = frozenset("of the and de da di du la le von van der den y".split())
_MEMBER_HEADINGS = re.compile(r"members|leadership|structure|people|crew|staff", re.I)
_RELATION_HEADINGS = re.compile(r"relation|allies|enemies|friends", re.I)
_M = "\u27e8(\\d+)\u27e9"  # ⟨i⟩: the i-th mention of the sentence in its skeleton


def _skeleton(sentence: str, offset: int, mentions: Sequence[Mention]) -> str:
    out, pos = [], offset
    for i, m in enumerate(mentions):
        out.append(sentence[pos - offset : m.start - offset])
        out.append(f"\u27e8{i}\u27e9")
        pos = m.end
        if sentence[pos - offset : pos - offset + 2] in {"'s", "’s"}:
            out.append("'s")
            pos += 2
    out.append(sentence[pos - offset :])
    return "".join(out)


def _kin(a: str, rel: str, b: str) -> tuple[str, str, str] | None:
    """``a`` is ``b``'s ``rel`` as a typed relation."""
    if rel in _PARENT_OF_CHILD:
        return (b, "parent-of", a)
    if rel in _CHILD_OF_PARENT:
        return (a, "parent-of", b)
    if rel in _GRAND:
        return (a, "grandparent-of", b)
    if rel in _GRANDCHILD:
        return (b, "grandparent-of", a)
    if rel in _SIBLING:
        return (a, "sibling-of", b)
    return (a, "kin-of", b)


_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "Vessa is the Lantern Queen's daughter"
    (
        re.compile(_M + r",?\s+(?:is|was)\s+(?:the\s+|a\s+)?" + _M + r"'s\s+(?:\w+\s+)?" + _KIN),
        "kin-a-b",
    ),
    # "Ilse Ashcombe, Mirel's missing sister"
    (re.compile(_M + r",\s+" + _M + r"'s\s+(?:\w+\s+)?" + _KIN), "kin-a-b"),
    # "Tobin's grandmother, Maud Harrow"
    (re.compile(_M + r"'s\s+(?:\w+\s+)?" + _KIN + r",?\s+" + _M), "kin-b-a"),
    # "Marshal Osric Dunmore commands the Watch", "She rules the Lantern Court"
    (
        re.compile(_M + r"\**\s+(?:commands|rules|leads|heads|runs)\s+(?:the\s+)?" + _M),
        "leader",
    ),
    # "Sualtim, son of Roig", "Death is the brother of Sleep"
    (
        re.compile(
            _M + r",?\s+(?:(?:is|was)\s+)?(?:the\s+|a\s+)?(?:\w+\s+)?" + _KIN + r"\s+of\s+" + _M
        ),
        "kin-of",
    ),
    # "Aldous Fenn is the abbot of Cinderhold Abbey", "Gideon Pike, a member of the Court"
    (
        re.compile(
            _M
            + r",?\s+(?:is\s+|was\s+)?(?:the|a|an|one)\s+([\w' -]{1,40}?)\s+(?:of|at|in)\s+(?:the\s+)?"
            + _M
        ),
        "role",
    ),
    # "St. Amsel's Turret in the Drowned Quarter", "Cinderhold Abbey stands on ... Emberfall"
    (
        re.compile(
            _M
            + r"(?:'s)?\s+(?:(?:stands|lies|sits|hangs|is|was)\s+)?(?:in|inside|beneath|under|on|at|above)\s+"
            r"(?:the\s+)?((?:[a-z][\w-]*\s+){0,5}?)" + _M
        ),
        "located",
    ),
    # "Hostile to the Lantern Court", "Mirel distrusts the innkeeper"
    (
        re.compile(
            _M
            + r"\s+(?:[\w' -]{0,30}\s)?(?:hostile to|at war with|enemy of|hates|betrayed)\s+(?:the\s+)?"
            + _M
        ),
        "enemy",
    ),
    (
        re.compile(
            _M
            + r"\s+(?:[\w' -]{0,30}\s)?(?:ally of|allied with|friend of|friends with|trusts|mentor to|hid|protects)\s+(?:the\s+)?"
            + _M
        ),
        "ally",
    ),
)


#: A sentence of a character's own page whose subject is a pronoun: the page's owner is meant.
_PRONOUN_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"\b(?:she|he)\s+(?:commands|rules|leads|heads|runs)\s+(?:the\s+)?" + _M, re.I),
        "leader-of",
    ),
    (
        re.compile(
            r"\b(?:she|he)\s+(?:hid|protects|defends|trusts|likes|loves)\s+(?:the\s+)?" + _M, re.I
        ),
        "ally-of",
    ),
    (re.compile(r"\b(?:she|he)\s+(?:hates|betrayed|hunts)\s+(?:the\s+)?" + _M, re.I), "enemy-of"),
)


def extract_relations(
    doc: Document, mentions: Sequence[Mention], owner: str | None = None
) -> tuple[RelationFact, ...]:
    """Relations ``doc``'s sentences state, between name keys (resolved at read time).

    Two sources: sentence patterns over a skeleton where each name is ``⟨i⟩`` (kinship,
    leadership, "the X of Y" roles, located-in, ally/enemy verbs, and in a view that defines
    ``owner`` a pronoun subject as the owner); and, in such a view, its
    ``Relationships``/``Relations`` items (ally or enemy by their words) and its
    ``Notable Members``/``Leadership`` items (member-of, leader-of by the role the item names).
    How far each is trusted is :func:`liminalis.knowledge.confidence.relation_confidence`."""
    text = doc.text
    ordered = sorted((m for m in mentions if not m.surface.isupper()), key=lambda m: m.start)
    starts = [m.start for m in ordered]
    out: list[RelationFact] = []
    for s, e, _ in split_sentences(text):
        lo, hi = bisect_right(starts, s - 1), bisect_right(starts, e - 1)
        ms = [m for m in ordered[lo:hi] if m.end <= e]
        sentence = text[s:e]
        if not ms or sentence.lstrip().startswith("#"):
            continue
        skel = _skeleton(sentence, s, ms)
        evidence = " ".join(sentence.split())
        found = _sentence_relations(skel, ms) if len(ms) >= 2 else []
        found += _pronoun_relations(skel, ms, owner) if owner else []
        out += [RelationFact(a, k, b, s, e, evidence) for a, k, b in found if a != b]
    if owner:
        out += _section_relations(text, ordered, owner)
    return tuple(dict.fromkeys(out))


def _sentence_relations(skel: str, ms: Sequence[Mention]) -> list[tuple[str, str, str]]:
    out = []
    for rx, kind in _PATTERNS:
        for m in rx.finditer(skel):
            found = _relation(kind, m, ms)
            if found:
                out.append(found)
    return out


def _pronoun_relations(skel: str, ms: Sequence[Mention], owner: str) -> list[tuple[str, str, str]]:
    return [
        (owner, kind, ms[int(m.group(1))].key)
        for rx, kind in _PRONOUN_PATTERNS
        for m in rx.finditer(skel)
    ]


def _relation(kind: str, m: re.Match[str], ms: Sequence[Mention]) -> tuple[str, str, str] | None:
    if kind == "kin-a-b":
        return _kin(ms[int(m.group(1))].key, m.group(3), ms[int(m.group(2))].key)
    if kind == "kin-b-a":
        return _kin(ms[int(m.group(3))].key, m.group(2), ms[int(m.group(1))].key)
    a, b = ms[int(m.group(1))].key, ms[int(m.group(m.lastindex or 2))].key
    if kind == "kin-of":
        return _kin(a, m.group(2), b)
    if kind == "role":
        role = m.group(2).lower().split()
        if not role or role[-1] not in _PERSON_ROLES:
            return None
        return (a, "leader-of" if role[-1] in _LEADER_ROLES else "member-of", b)
    if kind == "located":
        first = ms[int(m.group(1))]
        if first.initial and " " not in first.key:
            return None  # "Magic in the Vell valley": a capital that only opens the sentence
        between = set(m.group(2).lower().split())
        return None if between & _NOT_A_PLACE else (a, "located-in", b)
    return {
        "leader": (a, "leader-of", b),
        "enemy": (a, "enemy-of", b),
        "ally": (a, "ally-of", b),
    }.get(kind)


def _list_label_is_a_name(stripped: str) -> bool:
    """Whether a list item's bold label names something: ``**The Assayers:**`` does, ``**Masters,
    journeymen and apprentices:**`` (a head count) does not. An item without one passes."""
    m = re.match(r"(?:[-*+]\s+)?\*\*(.+?)\*\*", stripped)
    if not m:
        return True
    words = re.findall(r"[A-Za-z][\w'-]*", m.group(1))
    return all(w[0].isupper() or w.lower() in _NAME_PARTICLES for w in words)


def _member_kind(stripped: str) -> str:
    """``leader-of`` when a member item's first word after its name is a leader's role
    ("**The Lantern Queen** — ruler", "**Brother Aldous Fenn**, abbot"), else ``member-of``:
    "seven master bellwrights" further on does not make the Council the Guild's master."""
    rest = re.sub(r"^(?:[-*+]\s+)?\*\*.+?\*\*", "", stripped)
    words = [w.lower() for w in re.findall(r"[A-Za-z][\w'’-]*", rest)]
    words = [w for w in words if w not in {"the", "a", "an"}][:1]
    return "leader-of" if set(words) & (_LEADER_ROLES | {"ruler", "warden"}) else "member-of"


def _section_relations(text: str, mentions: Sequence[Mention], owner: str) -> list[RelationFact]:
    out: list[RelationFact] = []
    heading = ""
    for start, line in _lines(text):
        stripped = line.strip()
        if stripped.startswith("#"):
            heading = stripped.lstrip("# ")
            continue
        if not stripped.startswith(("-", "*")) or not heading:
            continue
        in_line = [m for m in mentions if start <= m.start < start + len(line)]
        # "**Tobin Harrow:** her closest friend" names its subject first, in bold; in
        # "Hostile to the Lantern Court" the capital of "Hostile" proves nothing.
        bold = bool(re.match(r"(?:[-*+]\s+)?\*\*", stripped))
        pool = in_line if bold else [m for m in in_line if not m.initial]
        target = pool[0] if pool else None
        if target is None or target.key == owner:
            continue
        evidence = " ".join(stripped.lstrip("-* ").split())
        end = start + len(line)
        if _MEMBER_HEADINGS.search(heading):
            if _list_label_is_a_name(stripped):
                kind = _member_kind(stripped)
                out.append(RelationFact(target.key, kind, owner, start, end, evidence))
        elif _RELATION_HEADINGS.search(heading):
            kind = _listed_kind(stripped)
            if kind:
                out.append(RelationFact(owner, kind, target.key, start, end, evidence))
    return out


def _listed_kind(stripped: str) -> str:
    """The relation a ``Relationships`` item states by its words, or ``""`` when none."""
    if _ENEMY_WORDS.search(stripped):
        return "enemy-of"
    if re.search(r"\bemploys?\b", stripped, re.I):
        return "employs"
    return "ally-of" if _ALLY_WORDS.search(stripped) else ""


# -- read time ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Entity:
    """One resolved entity, as a lens knows it."""

    key: str
    name: str
    type: str
    aliases: set[str] = field(default_factory=set)
    defined_in: set[str] = field(default_factory=set)
    mentions: list[tuple[str, Mention]] = field(default_factory=list)

    @property
    def documents(self) -> list[str]:
        """Doc ids of the views that define or mention it, most mentions first."""
        counts = Counter(d for d, _ in self.mentions)
        for d in self.defined_in:
            counts[d] += 0
        return sorted(counts, key=lambda d: (-counts[d], d))


class EntityIndex:
    """The entities of a set of views (those a lens sees), with every mention resolved.

    Build it only from facts the lens may see; it never looks anywhere else."""

    def __init__(self, views: Iterable[ViewFacts]) -> None:
        self.views = list(views)
        self.entities: dict[str, Entity] = {}
        self._alias: dict[str, str] = {}
        self._build()

    def resolve(self, key: str) -> str | None:
        """The entity key a name key stands for, or None."""
        return self._alias.get(key)

    def find(self, name: str) -> Entity | None:
        """The entity ``name`` (any alias, any case, possessive or not) names."""
        found = self.resolve(name_key(name))
        return self.entities.get(found) if found else None

    def _add_alias(self, alias: str, key: str, taken: dict[str, set[str]]) -> None:
        if alias:
            taken[alias].add(key)

    def _build(self) -> None:
        claims: dict[str, set[str]] = defaultdict(set)
        hints: dict[str, Counter[str]] = defaultdict(Counter)
        for v in self.views:
            for d in v.entities:
                ent = self.entities.get(d.key)
                if ent is None:
                    ent = self.entities[d.key] = Entity(d.key, d.name, d.type)
                ent.defined_in.add(v.doc_id)
                ent.aliases.update(d.aliases)
                claims[d.key].add(d.key)
                for a in d.aliases:
                    self._add_alias(name_key(a), d.key, claims)
        # An alias two entities claim names neither (a name key is always its own entity's).
        for alias, keys in claims.items():
            if alias in self.entities:
                self._alias[alias] = alias
            elif len(keys) == 1:
                self._alias[alias] = next(iter(keys))
        # Names no view defines: recurring ones become entities.
        views_of: dict[str, set[str]] = defaultdict(set)
        total: Counter[str] = Counter()
        free: Counter[str] = Counter()
        surfaces: dict[str, Counter[str]] = defaultdict(Counter)
        multiword: set[str] = set()
        for v in self.views:
            for m in v.mentions:
                views_of[m.key].add(v.doc_id)
                total[m.key] += 1
                free[m.key] += not m.initial
                surfaces[m.key][m.surface] += 1
                if len(m.surface.split()) >= 2:
                    multiword.add(m.key)
                if m.hint:
                    hints[m.key][m.hint] += 1
        dates = {k for k, h in hints.items() if h["date"]}
        players = {k for k, h in hints.items() if h["player"]}
        candidates = sorted(
            (k for k in total if k not in dates or k in self._alias),
            key=lambda k: (-len(k.split()), -total[k], k),
        )
        for key in candidates:
            if key in self._alias:
                continue
            if key in players:
                free[key] += 1
            if free[key] >= 1 and (
                len(views_of[key]) >= 2 or (key in multiword and self._support(key, total) >= 2)
            ):
                if len(key.split()) == 1 and self._word_owner(key, hints):
                    continue
                name = max(surfaces[key], key=lambda s: (surfaces[key][s], -len(s), s))
                name = re.sub(r"^(?:[Tt]he)\s+", "", name)
                self.entities[key] = Entity(key, name, "")
                self._alias[key] = key
        # One word of exactly one multi-word entity stands for it ("Dunmore", "Aldous").
        for key in candidates:
            if key not in self._alias and len(key.split()) == 1:
                owner = self._word_owner(key, hints)
                if owner:
                    self._alias[key] = owner
        for v in self.views:
            for m in v.mentions:
                target = self._alias.get(m.key)
                if target:
                    self.entities[target].mentions.append((v.doc_id, m))
                    if m.surface != self.entities[target].name:
                        self.entities[target].aliases.add(m.surface)
        for key, ent in self.entities.items():
            if not ent.type:
                votes: Counter[str] = Counter()
                for alias, target in self._alias.items():
                    if target == key:
                        votes.update(hints.get(alias, Counter()))
                ent.type = "player" if key in players else _vote(votes)
            ent.aliases.discard(ent.name)

    @staticmethod
    def _support(key: str, total: Counter[str]) -> int:
        """Mentions of a multi-word name plus those of its first and last words alone, where
        no other name shares that word ("Corvina Coldwater" … "Corvina")."""
        words = key.split()
        support = total[key]
        for w in {words[0], words[-1]} - HONORIFICS:
            shared = [k for k in total if k != key and w in k.split() and len(k.split()) > 1]
            if not shared:
                support += total.get(w, 0)
        return support

    def _word_owner(self, word: str, hints: dict[str, Counter[str]]) -> str | None:
        """The one multi-word entity ``word`` stands for: a character's first or last word (not
        a title), or any entity's head (last) word ("Chronicle", "Dunmore", "Aldous")."""
        if word in HONORIFICS:
            return None
        owners = set()
        for k, e in self.entities.items():
            words = k.split()
            if len(words) < 2:
                continue
            person = (e.type or _vote(hints.get(k, Counter()))) == "character"
            if word == words[-1] or (person and word == words[0]):
                owners.add(k)
        return next(iter(owners)) if len(owners) == 1 else None


def _vote(votes: Counter[str]) -> str:
    if not votes:
        return "other"
    best, n = max(votes.items(), key=lambda kv: (kv[1], kv[0] == "character", kv[0]))
    return best if n >= 1 else "other"
