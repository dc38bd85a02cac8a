"""Rolling chat memory: per (campaign, chat, lens), persisted in SQLite, restored after restart.

State per memory key (``chat_state.state`` JSON, turns in ``chat_turns``):

* **recent turns** — the last ``recent_turns`` exchanges, replayed verbatim as messages;
* **story so far** — older exchanges compressed to one line each (level 0), written when each
  was answered, with its own sources; when more than
  ``story_lines`` level-0 lines pile up, the oldest half folds into one level-1 line, so the
  summary is hierarchical and its size bounded;
* **document scores** and **entity scores** — exponentially decayed per turn,
  ``s ← decay · s + 1/(1 + rank)`` for documents and ``s ← decay · s + 1`` for names seen;
* **section provenance** — which sections of which documents answers were built from;
* **loaded material** — the last turn's documents, so a short pronoun-led follow-up ("and what
  did she do next?") can reuse them instead of retrieving again (see :func:`is_follow_up`).

The GM-only wall: the memory key includes the lens (``campaign:chat|lens``), so a players turn
never reads a GM turn's text, summary or loaded material; turns also store their lens and are
re-checked on load (a turn is reused only if its lens ⊆ the current lens, or the reader is GM).
A document a GM hides again (its visibility narrowed on re-ingest) makes every memory whose lens
lost it forget everything (:func:`forget_hidden`): what it remembers may quote the document.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from liminalis.clock import SystemClock
from liminalis.context.material import ContextDoc
from liminalis.context.tokens import default_counter
from liminalis.lens import GM, visible
from liminalis.ports import Clock, Message
from liminalis.store.graph import MemoryStore
from liminalis.store.sqlite import Database

__all__ = [
    "ChatMemory",
    "RollingMemory",
    "forget_hidden",
    "is_follow_up",
    "memory_key",
    "SystemClock",
]

_log = logging.getLogger(__name__)
_PRONOUN = re.compile(
    r"\b(he|she|they|him|her|them|his|hers|their|theirs|it|its|that|this|those|these|there)\b", re.I
)
_NAME = re.compile(r"\b[A-Z][a-z'’]+(?:[ -][A-Z][a-z'’]+)*\b")
_LONG_WORD = re.compile(r"[^\W\d_]{5,}")
_COMMON = frozenset(
    "about after again against before being below between could doing during every first further having "
    "other people right since their there these thing things those through under until where which while "
    "would should whose what's where's anything something nothing happened happen really still tells".split()
)
_NOT_NAMES = frozenset(
    "and so but then also what who whom whose where when why how did does do is was were are "
    "can could would will should tell ok okay i the a an".split()
)


def memory_key(campaign: str, chat: str, lens: frozenset[str]) -> str:
    return f"{campaign}:{chat}|{','.join(sorted(lens))}"


def is_follow_up(question: str, *, max_words: int = 10) -> bool:
    """A short question that leans on a pronoun and names nothing new."""
    q = question.strip()
    words = q.split()
    if not words or len(words) > max_words or "@" in q or not _PRONOUN.search(q):
        return False
    names = [m.group(0) for m in _NAME.finditer(q) if m.group(0).lower() not in _NOT_NAMES]
    return not names


def _new_words(question: str, known: str) -> int:
    """Long words (five letters or more, not common ones) of ``question`` that ``known`` lacks,
    compared by their first five letters (ring / rings / ringing)."""
    seen = {w.lower()[:5] for w in _LONG_WORD.findall(known)}
    words = {w.lower() for w in _LONG_WORD.findall(question)} - _COMMON
    return len({w[:5] for w in words} - seen)


async def forget_hidden(
    db: Database, campaign: str, was: frozenset[str], now: frozenset[str]
) -> int:
    """Forget every chat memory of ``campaign`` whose lens could read a document of visibility
    ``was`` and cannot read it at ``now`` (a GM hid it again): its turns, story lines and loaded
    material may quote it, and would be replayed to that lens. Returns how many were forgotten.

    The campaign's forget epoch moves on too, so an answer in flight — begun while the document
    was readable, its memory loaded before this — is not written back (:meth:`RollingMemory.record`).
    One write block, the epoch last: a memory loaded meanwhile either read the old epoch (and its
    answer is not recorded) or the new one, after its rows were gone.
    """
    if was <= now:  # opened wider: nobody loses it
        return 0

    # The campaign memory's activations and learned associations may lead to it too.
    await MemoryStore(db).forget_hidden(campaign, was, now)

    def loses_it(key: str) -> bool:
        lens = frozenset(x for x in key.rsplit("|", 1)[-1].split(",") if x)
        return visible(was, lens) and not visible(now, lens)

    doomed = await db.memory.forget(campaign, loses_it)
    if doomed:
        _log.info(
            "%s: forgot %d chat memories that may quote a document now hidden from them",
            campaign,
            len(doomed),
        )
    return len(doomed)


def _lens_ok(turn_lens: frozenset[str], lens: frozenset[str]) -> bool:
    return GM in lens or (bool(turn_lens) and turn_lens <= lens and GM not in turn_lens)


@dataclass
class ChatMemory:
    """One chat's memory under one lens."""

    key: str
    campaign: str
    lens: frozenset[str]
    turns: list[tuple[str, str]] = field(default_factory=list)  # (question, answer), oldest first
    story: list[tuple[int, str]] = field(default_factory=list)  # (level, line)
    doc_scores: dict[str, float] = field(default_factory=dict)
    entity_scores: dict[str, float] = field(default_factory=dict)
    sections: dict[str, list[str]] = field(default_factory=dict)
    loaded: list[dict[str, object]] = field(default_factory=list)
    loaded_stable: list[str] = field(default_factory=list)
    loaded_generation: int = -1
    #: Each recent turn's story line, written when the turn was answered (with *its* sources),
    #: oldest first; it joins the story when its turn rolls out of the recent turns.
    gists: list[str] = field(default_factory=list)
    last_question: str = ""
    updated_at: float = 0.0
    seq: int = 0
    #: The campaign's forget epoch when this memory was loaded (see :func:`forget_hidden`).
    forget_epoch: int = 0

    def story_text(self) -> str:
        return "\n".join(f"- {line}" for _, line in self.story)

    def recent_messages(self) -> list[Message]:
        """The recent turns as messages; a turn with an empty side is left out (the API refuses
        an empty message, and one recorded before empty answers were caught would fail every
        later request of the chat)."""
        out: list[Message] = []
        for q, a in self.turns:
            if q.strip() and a.strip():
                out += [Message("user", q), Message("assistant", a)]
        return out

    def loaded_documents(self) -> list[ContextDoc]:
        return [ContextDoc.from_dict(d) for d in self.loaded]


def _gist(question: str, answer: str, sources: Sequence[str]) -> str:
    first = " ".join(answer.split())
    first = re.sub(
        r"^Here is what the campaign's documents say \(quoted, not paraphrased\):\s*", "", first
    )
    first = first.lstrip("> ")[:220]
    src = f" (sources: {'; '.join(sources[:3])})" if sources else ""
    return f"Asked: {' '.join(question.split())[:160]} — answered: {first}{src}"


class RollingMemory:
    """Loads, updates and persists :class:`ChatMemory` (``async`` over the engine's database)."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Clock | None = None,
        recent_turns: int = 3,
        story_lines: int = 8,
        story_tokens: int = 600,
        decay: float = 0.6,
        follow_up_ttl_s: float = 1800.0,
    ) -> None:
        self.db = db
        self.clock = clock or SystemClock()
        self.recent_turns = recent_turns
        self.story_lines = story_lines
        self.story_tokens = story_tokens
        self.decay = decay
        self.follow_up_ttl_s = follow_up_ttl_s

    async def load(self, campaign: str, chat: str, lens: frozenset[str]) -> ChatMemory:
        key = memory_key(campaign, chat, lens)
        mem = ChatMemory(
            key=key,
            campaign=campaign,
            lens=frozenset(lens),
            forget_epoch=await self.db.memory.forget_epoch(campaign),
        )
        raw = await self.db.memory.state(key)
        if raw is not None:
            st = json.loads(raw)
            mem.story = [(int(lv), str(t)) for lv, t in st.get("story", [])]
            mem.doc_scores = {str(k): float(v) for k, v in st.get("doc_scores", {}).items()}
            mem.entity_scores = {str(k): float(v) for k, v in st.get("entity_scores", {}).items()}
            mem.sections = {str(k): list(v) for k, v in st.get("sections", {}).items()}
            mem.loaded = list(st.get("loaded", []))
            mem.loaded_stable = list(st.get("loaded_stable", []))
            mem.loaded_generation = int(st.get("loaded_generation", -1))
            mem.gists = [str(g) for g in st.get("gists", [])]
            mem.last_question = str(st.get("last_question", ""))
            mem.updated_at = float(st.get("updated_at", 0.0))
            mem.seq = int(st.get("seq", 0))
        pending_answer: str | None = None
        for r in await self.db.memory.recent_turns(key, self.recent_turns * 2):
            # newest first: an assistant row precedes (in this order) its question
            if not _lens_ok(r.lens, mem.lens):
                _log.error("chat memory %s holds a turn outside its lens; skipped", key)
                continue
            if r.role == "assistant":
                pending_answer = r.content
            elif pending_answer is not None:
                mem.turns.insert(0, (r.content, pending_answer))
                pending_answer = None
        return mem

    def can_reuse(self, mem: ChatMemory, question: str, *, generation: int) -> bool:
        """Whether ``question`` is a follow-up that may reuse the loaded material: pronoun-led and
        short (:func:`is_follow_up`), recent, and about what the last exchange was about. A
        chat's memory is shared by everyone in the channel, so a lower-case question on a new
        subject ("what does the drowned bell do when it rings?") must not get the previous
        asker's material: more than one long word that the last question, its answer and the
        loaded documents' titles and sections lack means a new subject, retrieved afresh."""
        if not mem.loaded or mem.loaded_generation != generation or not is_follow_up(question):
            return False
        age = self.clock.now().timestamp() - mem.updated_at
        if not 0 <= age <= self.follow_up_ttl_s:
            return False
        known = [mem.last_question, *(mem.turns[-1] if mem.turns else ())]
        known += [f"{d.get('title', '')} {d.get('section', '')}" for d in mem.loaded]
        return _new_words(question, " ".join(map(str, known))) <= 1

    async def record(
        self,
        mem: ChatMemory,
        *,
        question: str,
        answer: str,
        documents: Sequence[ContextDoc],
        stable: Sequence[str],
        sources: Sequence[str],
        generation: int,
    ) -> None:
        """Add one exchange, roll older turns into the story, and persist."""
        now = self.clock.now().timestamp()
        mem.turns.append((question, answer))
        mem.gists.append(_gist(question, answer, sources))
        while len(mem.turns) > self.recent_turns:
            q, a = mem.turns.pop(0)
            # The turn's own line; a state written before lines were kept has none (no sources).
            mem.story.append(
                (0, mem.gists.pop(0) if len(mem.gists) > len(mem.turns) else _gist(q, a, ()))
            )
        del mem.gists[: max(0, len(mem.gists) - len(mem.turns))]
        self._fold(mem)
        for scored in list(mem.doc_scores):
            mem.doc_scores[scored] *= self.decay
        for d in documents:
            mem.doc_scores[d.doc_id] = mem.doc_scores.get(d.doc_id, 0.0) + 1.0 / (1 + d.rank)
            if d.section:
                secs = mem.sections.setdefault(d.doc_id, [])
                if d.section not in secs:
                    secs.append(d.section)
        mem.doc_scores = {k: round(v, 4) for k, v in mem.doc_scores.items() if v >= 0.01}
        for e in list(mem.entity_scores):
            mem.entity_scores[e] *= self.decay
        for name in {m.group(0) for m in _NAME.finditer(f"{question}\n{answer}")}:
            if name.lower() not in _NOT_NAMES and len(name) > 2:
                mem.entity_scores[name] = mem.entity_scores.get(name, 0.0) + 1.0
        mem.entity_scores = dict(
            sorted(
                ((k, round(v, 4)) for k, v in mem.entity_scores.items() if v >= 0.05),
                key=lambda kv: -kv[1],
            )[:50]
        )
        # A follow-up that reused material keeps the question that loaded it (the referent).
        if mem.loaded_generation != generation or [d.get("doc_id") for d in mem.loaded] != [
            d.doc_id for d in documents
        ]:
            mem.last_question = question
        mem.loaded = [d.to_dict() for d in documents]
        mem.loaded_stable = list(stable)
        mem.loaded_generation = generation
        mem.updated_at = now
        mem.seq += 2
        state = {
            "story": mem.story,
            "doc_scores": mem.doc_scores,
            "entity_scores": mem.entity_scores,
            "sections": mem.sections,
            "loaded": mem.loaded,
            "loaded_stable": mem.loaded_stable,
            "loaded_generation": mem.loaded_generation,
            "last_question": mem.last_question,
            "updated_at": mem.updated_at,
            "seq": mem.seq,
            "gists": mem.gists,
        }
        # A document was hidden since this memory was loaded: the answer and the state loaded
        # with it may quote it. Forgetting wins; this exchange is not remembered.
        if not await self.db.memory.record(
            mem.key,
            campaign=mem.campaign,
            question=question,
            answer=answer,
            lens=mem.lens,
            state=json.dumps(state),
            epoch=mem.forget_epoch,
        ):
            _log.info(
                "chat memory %s: a document was hidden during the answer; not recorded", mem.key
            )

    def _fold(self, mem: ChatMemory) -> None:
        """Keep the story bounded: fold the oldest level-0 lines into one higher-level line."""
        counter = default_counter()
        level0 = [i for i, (lv, _) in enumerate(mem.story) if lv == 0]
        too_long = counter.count(mem.story_text()) > self.story_tokens
        if len(level0) <= self.story_lines and not too_long:
            return
        take = level0[: max(2, len(level0) // 2)]
        asked = [
            re.sub(r" — answered:.*$", "", mem.story[i][1]).removeprefix("Asked: ") for i in take
        ]
        line = "Earlier, the party asked: " + "; ".join(a[:80] for a in asked)
        keep = [s for i, s in enumerate(mem.story) if i not in take]
        insert_at = take[0]
        mem.story = keep[:insert_at] + [(1, line)] + keep[insert_at:]
        while counter.count(mem.story_text()) > self.story_tokens and len(mem.story) > 1:
            mem.story.pop(0)
