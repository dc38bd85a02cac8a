"""The answer pipeline: a retrieved bundle becomes a cited answer, inside a token budget, across a chat.

``Responder`` is the one call adapters use for a question::

    memory (chat, lens) → time words? force those session notes (knowledge: session order)
      → follow-up? reuse loaded material : engine.retrieve(lens)
      → split (standing docs | recalled) → tier → budget → prompt (stable | breakpoint | volatile)
      → language model, or the offline extractive answerer → record the turn → Answer

The knowledge layer (filled by the seeded passes, read through the lens) adds three things, each
only once the passes have written it, so an engine whose passes never ran (the benchmarks)
builds the very prompts it built before: the lens's campaign overview in the stable half, the
stored per-view summaries for tiering, and for a question that names a time ("last session",
"session 4", "so far") those sessions' notes forced into retrieval with their summaries.

The model is called through the :class:`~liminalis.routing.Router` (role ``reply``,
foreground), the one gate of every model call. Without a model (or past the day's token budget)
the offline answerer (:mod:`liminalis.answer.offline`) answers instead;
:mod:`liminalis.answer.citations` reads the sources back from the text.

Lens wall: the bundle comes from ``engine.retrieve`` for the caller's lens, every document is
re-checked against the catalog before it reaches the prompt, and chat memory is keyed by lens.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from liminalis.answer.citations import Answer, cited_sources, with_not_covered
from liminalis.answer.offline import OfflineAnswerer
from liminalis.answer.ports import AnswerSources
from liminalis.campaign import CampaignConfig
from liminalis.clock import SystemClock
from liminalis.context import DEFAULT_CONTEXT_TOKENS
from liminalis.context.budget import BudgetParams
from liminalis.context.material import ContextDoc
from liminalis.context.prompt import (
    Prompt,
    build_prompt,
    instructions_for,
    split_bundle,
    stable_document,
)
from liminalis.context.rolling import ChatMemory, RollingMemory
from liminalis.context.tiering import TierParams
from liminalis.context.tokens import TokenCounter, at_most, default_counter
from liminalis.errors import BudgetSpent, ConfigError, ModelUnavailable, SpendRefused, StoreError
from liminalis.ingest.sections import source_of
from liminalis.lens import Lens
from liminalis.ports import Clock, LanguageModel, Usage
from liminalis.routing import Router
from liminalis.scope import CampaignScope
from liminalis.spend import DailyTokenGate
from liminalis.text import clean_text, split_sentences
from liminalis.types import Span
from liminalis.workers import run_cpu

__all__ = ["Responder"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Material:
    """What one prompt is built from: its standing and recalled documents, their texts and
    matched spans, and the words the material is clipped to."""

    stable: list[ContextDoc]
    volatile: list[ContextDoc]
    texts: dict[str, str]
    matched: dict[str, tuple[Span, ...]]
    clip_query: str
    reused: bool = False


class Responder:
    """Answer a question for a lens from that lens's material only (the path every adapter uses).

    Args:
        engine: the campaign's side of an answer (:class:`~liminalis.answer.ports.AnswerSources`;
            the Engine in the product).
        model: a ``LanguageModel``; ``None`` uses the offline extractive answerer.
        budget_tokens: default token budget for the whole prompt.
        clock: for chat memory timestamps (frozen in tests).
        gate: the daily token limit, a policy of the router built for ``model``.
        router: the service's router (its model is the answering model); default one over
            ``model`` with ``gate`` and the model's own role table.
    """

    def __init__(
        self,
        engine: AnswerSources,
        *,
        model: LanguageModel | None = None,
        budget_tokens: int = DEFAULT_CONTEXT_TOKENS,
        clock: Clock | None = None,
        tier: TierParams = TierParams(),
        budget_params: BudgetParams = BudgetParams(),
        memory: RollingMemory | None = None,
        stable_doc_tokens: int = 1500,
        max_tokens: int = 800,
        offline: OfflineAnswerer | None = None,
        gate: DailyTokenGate | None = None,
        answer_deadline_s: float | None = 90.0,
        router: Router | None = None,
        knowledge_enabled: bool = True,
        overview_tokens: int = 1000,
    ) -> None:
        self.engine = engine
        if router is None and model is not None:
            router = Router(
                model,
                db=engine.db,
                clock=gate.clock if gate is not None else (clock or SystemClock()),
                daily=gate,
            )
        elif router is not None and gate is not None:
            router.daily = gate
        #: Every model call of the answer goes through it (role ``reply``, foreground).
        self.router = router
        self.model = router.model if router is not None else None
        self.budget_tokens = budget_tokens
        self.tier = tier
        self.budget_params = budget_params
        self.memory = memory or RollingMemory(engine.db, clock=clock)
        self.stable_doc_tokens = stable_doc_tokens
        self.max_tokens = max_tokens
        #: The most one answer may wait on the model, retries included (the client's timeout is
        #: per attempt: a hung model with its retries kept a player waiting about five minutes).
        self.answer_deadline_s = answer_deadline_s
        self.offline = offline or OfflineAnswerer()
        #: The router's daily token limit; one assigned later is the router's from the next call.
        self.gate = router.daily if router is not None else gate
        #: Read the knowledge layer (overview, summaries, session order) into the prompt.
        self.knowledge_enabled = knowledge_enabled
        #: The most the campaign overview may take of the cached prefix.
        self.overview_tokens = overview_tokens
        self.last_prompt: Prompt | None = None

    @property
    def counter(self) -> TokenCounter:
        """The one token counter (loaded once, on first use)."""
        return default_counter()

    async def respond(
        self,
        campaign: str | CampaignConfig | CampaignScope,
        question: str,
        lens: Iterable[str],
        *,
        chat: str | None = None,
        forced: Sequence[str] = (),
        budget_tokens: int | None = None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> Answer:
        """Answer ``question`` for ``lens``; ``on_text`` receives the growing text when streaming.

        Stages: the time words' sessions → the material (reused or retrieved) → the prompt →
        the answer (model or offline) → what the chat and the campaign memory keep of it."""
        question = clean_text(question)  # a lone surrogate would fail the tokenizers and SQLite
        scope = await self.engine.scope(campaign, lens)
        mem = await self.memory.load(scope.slug, chat, scope.lens) if chat else None
        notes: list[str] = []
        # "What happened last session?": the session order says which notes; they are forced
        # into retrieval (so never a follow-up's reused material) and briefed by their summaries.
        times = (
            await self.engine.knowledge.resolve_time(scope.slug, scope.lens, question)
            if self.knowledge_enabled
            else []
        )
        if times:
            forced = tuple(dict.fromkeys([*forced, *(source_of(d) for d in times)]))
            notes.append(f"time words: {len(times)} session note(s) forced")
        material = await self._material(scope, question, mem, chat, forced, notes)
        prompt, sessions = await self._prompt(
            scope, question, material, mem, times, budget_tokens, notes
        )
        offline = functools.partial(
            self._offline, question, material.clip_query, prompt, sessions, notes, scope.lens
        )
        # The offline answerer splits and scores every sentence of the material: in a worker.
        if self.router is None:
            answer = await run_cpu(offline)
        else:
            answer = await self._model_answer(
                prompt, notes, scope.lens, on_text, offline, campaign=scope.slug, chat=chat
            )
        await self._remember(scope, question, answer, prompt, mem, reused=material.reused)
        return answer

    async def _material(
        self,
        scope: CampaignScope,
        question: str,
        mem: ChatMemory | None,
        chat: str | None,
        forced: Sequence[str],
        notes: list[str],
    ) -> _Material:
        """What the prompt is built from: a follow-up's reused material, or a fresh retrieval."""
        # With the campaign memory on, every question is retrieved: memory re-ranks it.
        if (
            mem is not None
            and not forced
            and not self.engine.memory_enabled
            and self.memory.can_reuse(mem, question, generation=scope.catalog.generation)
        ):
            notes.append("follow-up: reused the material loaded for the previous question")
            return await self._reused(scope, question, mem)
        catalog, lens = scope.catalog, scope.lens
        bundle = await self.engine.retrieve(scope, question, lens, chat=chat, forced=forced)
        visible = [d for d in bundle.documents if catalog.visible_doc(d.doc_id, lens)]
        if len(visible) != len(bundle.documents):
            _log.error(
                "bundle for lens %s held documents the lens may not see; dropped", sorted(lens)
            )
        texts = {d.doc_id: catalog.documents[d.doc_id].text for d in visible}
        # Token counts of whole documents: off the event loop, like the prompt below.
        stable, volatile, matched = await run_cpu(
            split_bundle,
            bundle,
            texts,
            stable_doc_tokens=self.stable_doc_tokens,
            counter=self.counter,
        )
        notes.extend(bundle.notes)
        return _Material(
            stable=[d for d in stable if d.doc_id in texts],
            volatile=[d for d in volatile if d.doc_id in texts],
            texts=texts,
            matched=matched,
            clip_query=question,
        )

    async def _reused(self, scope: CampaignScope, question: str, mem: ChatMemory) -> _Material:
        """A pronoun-led follow-up: the material the previous turn loaded, still visible."""
        catalog, lens = scope.catalog, scope.lens
        stable_ids = [d for d in mem.loaded_stable if catalog.visible_doc(d, lens)]
        stable = await run_cpu(
            lambda: [
                stable_document(
                    ContextDoc(
                        d, catalog.documents[d].title, catalog.documents[d].type, pin="always"
                    ),
                    catalog.documents[d].text,
                    cap_tokens=self.stable_doc_tokens,
                    counter=self.counter,
                )
                for d in stable_ids
            ]
        )
        volatile = [d for d in mem.loaded_documents() if catalog.visible_doc(d.doc_id, lens)]
        return _Material(
            stable=stable,
            volatile=volatile,
            texts={},
            matched={},
            clip_query=f"{mem.last_question} {question}",
            reused=True,
        )

    async def _prompt(
        self,
        scope: CampaignScope,
        question: str,
        material: _Material,
        mem: ChatMemory | None,
        times: Sequence[str],
        budget_tokens: int | None,
        notes: list[str],
    ) -> tuple[Prompt, list[tuple[str, str, str]]]:
        """The prompt for the material, and the sessions a time question named."""
        overview, summaries = "", None
        sessions: list[tuple[str, str, str]] = []
        if self.knowledge_enabled:
            overview, summaries, sessions = await self._knowledge(
                scope.slug, scope.lens, material.volatile, times, self.counter
            )
        config = scope.config
        # Tiering and clipping to the budget count tokens over the whole material: tens of
        # milliseconds a question, which a burst of questions must not spend on the event loop.
        prompt = await run_cpu(
            functools.partial(
                build_prompt,
                instructions=instructions_for(
                    config.name, config.description, campaign_overview=overview
                ),
                stable=material.stable,
                volatile=material.volatile,
                question=question,
                texts=material.texts,
                matched=material.matched,
                story=mem.story_text() if mem else "",
                recent=mem.recent_messages() if mem else (),
                budget=budget_tokens if budget_tokens is not None else self.budget_tokens,
                tier=self.tier,
                budget_params=self.budget_params,
                summaries=summaries,
                briefing="\n".join(f"- {title}: {summary}" for _, title, summary in sessions),
                clip_query=material.clip_query,
                counter=self.counter,
            )
        )
        self.last_prompt = prompt
        notes.extend(prompt.notes)
        return prompt, sessions

    def _offline(
        self,
        question: str,
        clip_query: str,
        prompt: Prompt,
        sessions: Sequence[tuple[str, str, str]],
        notes: Sequence[str],
        lens: Lens,
        why: str = "",
        note: str = "",
    ) -> Answer:
        """The quoted answer, headed by ``why`` when it stands in for the model's."""
        if sessions:  # a time question: the sessions it names, by their summaries
            quoted = self.offline.sessions(question, sessions, prompt.all_documents, lens=lens)
        else:
            quoted = self.offline.answer(clip_query, prompt.all_documents, lens=lens)
        return replace(
            quoted,
            text=f"_{why}_\n\n{quoted.text}" if why else quoted.text,
            notes=(*notes, *((note,) if note else ()), *quoted.notes),
            lens=lens,
        )

    async def _remember(
        self,
        scope: CampaignScope,
        question: str,
        answer: Answer,
        prompt: Prompt,
        mem: ChatMemory | None,
        *,
        reused: bool,
    ) -> None:
        """The turn into the campaign memory (only the documents the answer cites) and the chat
        memory."""
        if not reused:
            await self.engine.remember_turn(scope, question, [s.doc_id for s in answer.sources])
        if mem is None:
            return
        try:
            await self.memory.record(
                mem,
                question=question,
                answer=answer.text,
                documents=prompt.documents,
                stable=[d.doc_id for d in prompt.stable_documents],
                sources=[s.label() for s in answer.sources],
                generation=scope.catalog.generation,
            )
        except StoreError as exc:
            # The answer is already computed (and, with a model, paid for): a memory that cannot
            # be written costs the chat its follow-up context, never the player the answer.
            _log.warning(
                "chat memory %s not recorded; the answer is returned without it: %s",
                mem.key,
                exc,
            )

    async def _knowledge(
        self,
        slug: str,
        lens: Lens,
        volatile: Sequence[ContextDoc],
        times: Sequence[str],
        counter: TokenCounter,
    ) -> tuple[str, dict[str, str] | None, list[tuple[str, str, str]]]:
        """What the knowledge layer holds for this prompt, each part read through ``lens``: the
        campaign overview (capped to ``overview_tokens`` by whole lines), the stored summaries of
        the volatile documents (cut to whole sentences within the tier's summary size; ``None``
        when there are none, so tiering makes its own), and ``(doc_id, title, summary)`` of the
        sessions the question's time words named."""
        knowledge = self.engine.knowledge
        overview = _cap_lines(
            await knowledge.stored_overview(slug, lens), self.overview_tokens, counter
        )
        stored = await knowledge.summaries_for(slug, lens, [d.doc_id for d in volatile])
        summaries = {
            d: cut
            for d, text in stored.items()
            if (cut := _cap_sentences(text, self.tier.summary_tokens, counter))
        }
        sessions = await knowledge.session_notes(slug, lens, times) if times else []
        return overview, summaries or None, sessions

    async def _model_answer(
        self,
        prompt: Prompt,
        notes: list[str],
        lens: Lens,
        on_text: Callable[[str], Awaitable[None]] | None,
        offline: Callable[[str, str], Answer],
        *,
        campaign: str,
        chat: str | None = None,
    ) -> Answer:
        """The model's answer, or — the day's budget spent, the model busy, hung past the
        deadline, refusing the request or silent — the quoted answer, marked as such. A stream
        that broke after some text keeps that text, marked as cut, before the quoted answer."""
        shown: list[str] = []  # what a stream already put before the asker
        try:
            answer = await asyncio.wait_for(
                self._ask_model(
                    prompt, notes, lens, on_text, campaign=campaign, chat=chat, shown=shown
                ),
                self.answer_deadline_s,
            )
        except (
            BudgetSpent,
            SpendRefused,
            StoreError,
            TimeoutError,
            ModelUnavailable,
            ConfigError,
        ) as exc:
            answer = await self._instead(exc, prompt, offline, shown)
        if not answer.text.strip():
            # No text (a refusal can come back empty): an empty turn in the chat memory would
            # make every later request invalid (the API refuses empty messages).
            _log.warning("model returned no text: answering offline")
            answer = replace(
                offline(
                    "The language model gave no answer, so I quote the documents.",
                    "model returned no text: offline answer",
                ),
                usage=answer.usage,
            )
        return answer

    async def _instead(
        self,
        exc: Exception,
        prompt: Prompt,
        offline: Callable[[str, str], Answer],
        shown: Sequence[str],
    ) -> Answer:
        """The quoted answer standing in for the model's, headed by why (called while ``exc``
        is being handled, so a logged traceback is its)."""
        if isinstance(exc, BudgetSpent):
            return await run_cpu(
                offline,
                "Today's language-model budget is spent, so until midnight UTC I quote the documents.",
                "daily model-token budget spent: offline answer",
            )
        if isinstance(exc, SpendRefused):  # not raised for a foreground reply today
            _log.warning("model call refused (%s): answering offline", exc)
            return await run_cpu(offline, exc.user_message, f"{type(exc).__name__}: offline answer")
        if isinstance(exc, StoreError):
            # The router could not book the call against the daily limit: not made, not paid.
            _log.exception("model call not booked: answering offline")
            return await run_cpu(
                offline,
                "The language model is unavailable right now, so I quote the documents.",
                "model call not booked: offline answer",
            )
        if isinstance(exc, ConfigError):
            # A refused key, an unknown model name, a request too large: the host's to fix
            # (logged at ERROR); the question still gets the quoted answer.
            _log.error("model refused the request (%s): answering offline", exc)
            return await run_cpu(
                offline,
                "The language model could not answer (the host has been told), so I quote the "
                "documents.",
                "model refused the request: offline answer",
            )
        return await self._unavailable(exc, prompt, offline, shown)

    async def _unavailable(
        self,
        exc: Exception,
        prompt: Prompt,
        offline: Callable[[str, str], Answer],
        shown: Sequence[str],
    ) -> Answer:
        """Busy, overloaded, timed out after the client's retries or past the answer's own
        deadline: the question still gets the grounded offline answer, marked as such; what a
        stream already showed stays, marked as cut, and its citations count."""
        hung = isinstance(exc, TimeoutError)
        _log.warning(
            "model unavailable (%s): answering offline",
            f"no answer within {self.answer_deadline_s}s" if hung else exc,
        )
        partial = "".join(shown).strip()
        if not partial:
            return await run_cpu(
                offline,
                "The language model is unavailable right now, so I quote the documents.",
                "model timed out: offline answer" if hung else "model unavailable: offline answer",
            )
        quoted = await run_cpu(
            offline,
            "The language model's answer broke off there, so I quote the documents.",
            "model stream cut: partial answer, then offline answer",
        )
        cited = cited_sources(partial, prompt.all_documents)
        return replace(
            quoted,
            text=f"{partial} …\n\n{quoted.text}",
            sources=(*cited, *(s for s in quoted.sources if s not in cited)),
            usage=exc.used if isinstance(exc, ModelUnavailable) and exc.used else Usage(),
        )

    async def _ask_model(
        self,
        prompt: Prompt,
        notes: list[str],
        lens: Lens,
        on_text: Callable[[str], Awaitable[None]] | None,
        *,
        campaign: str,
        chat: str | None = None,
        shown: list[str] | None = None,
    ) -> Answer:
        """``shown`` collects the text a stream delivers, for the caller to keep if it breaks."""
        assert self.router is not None
        if self.gate is not self.router.daily and (
            self.gate is None or isinstance(self.gate, DailyTokenGate)
        ):
            self.router.daily = self.gate
        # A GM may give one chat its own reply model (``/budget model``): read per answer, so a
        # change holds from the chat's next question. The view moves the reply role only and
        # shares the router's slots and ledger; summaries, recaps and passes keep their models.
        try:
            override = await self.engine.chat_model(campaign, chat)
        except StoreError:  # the configured reply model answers; the chat's choice waits
            _log.exception("the reply model of chat %s could not be read", chat)
            override = None
        router = self.router.for_chat(override)
        # The booking: the prompt and the most the model may write.
        estimate = prompt.tokens + self.max_tokens
        if on_text is None:
            done = await router.complete(
                "reply",
                system=prompt.system,
                messages=prompt.messages,
                campaign=campaign,
                foreground=True,
                cache_upto=prompt.cache_upto,
                max_tokens=self.max_tokens,
                estimate=estimate,
            )
            text, model_name, usage = done.text, done.model, done.usage
            if done.stop_reason == "max_tokens" and text.strip():
                # Cut at the length limit: say so rather than pass a half sentence off as whole.
                text = text.rstrip() + " …\n\n_(The answer was cut short at its length limit.)_"
                notes = [*notes, "model answer cut at max_tokens"]
        else:
            parts: list[str] = [] if shown is None else shown
            streamed = router.stream(
                "reply",
                system=prompt.system,
                messages=prompt.messages,
                campaign=campaign,
                foreground=True,
                cache_upto=prompt.cache_upto,
                max_tokens=self.max_tokens,
                estimate=estimate,
            )
            async for chunk in streamed:
                parts.append(chunk)
                await on_text("".join(parts))
            text, model_name, usage = "".join(parts), streamed.model, streamed.usage
        # Sources are what the text cites of the prompt's documents, nothing else: an answer
        # citing none says the notes do not cover it.
        return with_not_covered(
            Answer(
                text=text.strip(),
                sources=cited_sources(text, prompt.all_documents),
                model=model_name,
                usage=usage,
                notes=tuple(notes),
                lens=lens,
            )
        )


def _cap_lines(text: str, tokens: int, counter: TokenCounter) -> str:
    """``text`` cut to the whole lines that fit ``tokens`` (an overview's parts are lines)."""
    if not text or tokens <= 0:
        return ""
    if at_most(counter, text, tokens):
        return text
    kept: list[str] = []
    used = 0
    for line in text.splitlines():
        n = counter.count(line) + 1
        if used + n > tokens:
            break
        kept.append(line)
        used += n
    return "\n".join(kept).rstrip()


def _cap_sentences(text: str, tokens: int, counter: TokenCounter) -> str:
    """The leading whole sentences of ``text`` within ``tokens`` ("" when the first is over)."""
    if tokens <= 0:
        return ""
    out: list[str] = []
    used = 0
    for s, e, _ in split_sentences(text):
        sentence = text[s:e].strip()
        n = counter.count(sentence)
        if used + n > tokens:
            break
        out.append(sentence)
        used += n
    return " ".join(out)
