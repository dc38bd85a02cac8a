"""Prompt layout shaped for prompt caching: a stable half, a breakpoint, then a volatile half.

``system`` blocks, in order::

    [0] instructions + campaign description    ┐ stable half: byte-identical across the turns
        + the lens's campaign overview          │ (the knowledge layer's, when it holds one)
    [1] standing documents (always-include and  │ of a chat while the campaign and its pins are
        /pin pins), whole, deterministically    ┘ unchanged → cache_control breakpoint after [1]
        capped
    [2] briefing (the sessions a time question  ─ volatile half (on-demand material: forced,
        names), recalled material (tiered,          @-mentioned and named documents go here)
        budgeted), the story so far

then ``messages``: the recent turns verbatim, then the question. ``Prompt.cache_upto`` counts
the stable blocks; a provider without breakpoints receives the identical blocks and ignores it.

Nothing in the stable half depends on the question: standing documents render from their full
text (never the query-shaped rendering) and are capped head-first, not query-clipped.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from liminalis.context.budget import BudgetParams, Fitted, clip_segments, fit_budget
from liminalis.context.material import ContextDoc, count_blocks, from_rendered, plain
from liminalis.context.tiering import TierParams, TierReport, tier_documents
from liminalis.context.tokens import TokenCounter, at_most, default_counter
from liminalis.ports import Message
from liminalis.types import Bundle, Segment, Span

__all__ = [
    "Prompt",
    "STABLE_PINS",
    "INSTRUCTIONS",
    "instructions_for",
    "split_bundle",
    "stable_document",
    "build_prompt",
]

_log = logging.getLogger(__name__)

#: Pin reasons whose documents stand in every turn (stable half). Forced, mentioned and named
#: documents change per question and belong in the volatile half.
STABLE_PINS = frozenset({"always", "pinned"})

INSTRUCTIONS = """\
You answer questions about the tabletop role-playing campaign "{name}" for the people playing it.

Rules:
- Answer only from the campaign material in this prompt (standing documents, retrieved material, \
the story so far). Do not invent names, events or rules.
- If the material does not contain the answer, say so plainly and briefly, and say what it does \
cover if that helps.
- Cite every source you use in square brackets by its heading exactly as shown after "## " \
(document title, and section when given), e.g. [The Drowned Bell — History].
- Text marked "[… omitted …]" or "[… clipped …]" was left out; do not guess what it said.
- Be concise: a few sentences, or a short list for lists."""


def instructions_for(name: str, overview: str = "", *, campaign_overview: str = "") -> str:
    """The first stable block: the rules, the campaign's own description (``overview``), and
    the knowledge layer's overview for the asker's lens (``campaign_overview``), each omitted
    when empty. Nothing in it depends on the question, so it stays cached."""
    text = INSTRUCTIONS.format(name=name)
    if overview.strip():
        text += f"\n\n# Campaign overview\n\n{overview.strip()}"
    if campaign_overview.strip():
        text += (
            "\n\n# What the campaign's documents hold (an index built from them; quote the "
            f"documents, not this)\n\n{campaign_overview.strip()}"
        )
    return text


@dataclass(frozen=True, slots=True)
class Prompt:
    """A laid-out prompt: stable blocks, the volatile block, recent turns and the question."""

    system: tuple[str, ...]
    cache_upto: int
    messages: tuple[Message, ...]
    stable_documents: tuple[ContextDoc, ...]
    documents: tuple[ContextDoc, ...]
    tokens: int
    fitted: Fitted | None = None
    tiering: TierReport = TierReport()
    notes: tuple[str, ...] = ()

    @property
    def stable(self) -> str:
        """The cached prefix, as one string (what must stay byte-identical)."""
        return "\x1e".join(self.system[: self.cache_upto])

    @property
    def all_documents(self) -> tuple[ContextDoc, ...]:
        return self.stable_documents + self.documents

    def text(self) -> str:
        """Everything the model receives, flattened (benchmarks and lens tests read this)."""
        return "\n\n".join([*self.system, *(m.content for m in self.messages)])


def stable_document(
    doc: ContextDoc, full_text: str, *, cap_tokens: int, counter: TokenCounter
) -> ContextDoc:
    """A standing document from its full text, capped head-first (question-independent)."""
    # The section of a rendered document follows the question's matches: drop it here.
    whole = replace(doc, segments=plain(full_text), tier="whole", section="")
    clipped = _standing_clip(full_text, cap_tokens, counter)  # type: ignore[arg-type]  # counters hash by identity
    return whole if clipped is None else whole.with_segments(clipped, "clipped")


@functools.lru_cache(maxsize=64)
def _standing_clip(
    full_text: str, cap_tokens: int, counter: TokenCounter
) -> tuple[Segment, ...] | None:
    """The clipped text of a standing document, None when it fits whole. Remembered: it does
    not depend on the question, and a pinned document is clipped on every question (a pinned
    5 MB document cost 6 s a question). The catalog hands over the same string object each
    time, whose hash Python keeps, so a hit costs nothing."""
    if at_most(counter, full_text, cap_tokens):
        return None
    return clip_segments(plain(full_text), cap_tokens, query="", counter=counter)[0]


def split_bundle(
    bundle: Bundle,
    texts: Mapping[str, str],
    *,
    stable_doc_tokens: int = 1500,
    counter: TokenCounter | None = None,
) -> tuple[list[ContextDoc], list[ContextDoc], dict[str, tuple[Span, ...]]]:
    """Standing documents (stable half), the rest (volatile half), and matched spans by doc.

    The matched spans include each document's ``related`` passages (its further candidates in
    the retrieval pool): tiering keeps every passage of a background document that retrieval
    found relevant, not only the few that made the kept hits.
    """
    c = counter or default_counter()
    reasons = {h.doc_id: h.pin_reason for h in bundle.hits if h.pinned}
    stable: list[ContextDoc] = []
    volatile: list[ContextDoc] = []
    for rank, d in enumerate(bundle.documents):
        cd = from_rendered(d, rank=rank, pin=reasons.get(d.doc_id, "pinned" if d.pinned else ""))
        if cd.pin in STABLE_PINS and d.doc_id in texts:
            standing = stable_document(cd, texts[d.doc_id], cap_tokens=stable_doc_tokens, counter=c)
            stable.append(standing)
            if standing.tier == "clipped" and d.matched:
                # The standing copy is the document's head (question-independent, so the prompt
                # cache holds); what this question matched past it joins the volatile half, or a
                # pinned long document would hide more of itself than an unpinned one. Unpinned
                # there: it is recalled material, tiered and budgeted like any other.
                volatile.append(replace(cd, pin=""))
        else:
            volatile.append(cd)
    matched = {d.doc_id: d.matched + d.related for d in bundle.documents}
    return stable, volatile, matched


def _material(docs: Sequence[ContextDoc]) -> str:
    return "\n\n".join(d.block() for d in docs)


def _tier_to_fit(
    volatile: Sequence[ContextDoc],
    texts: Mapping[str, str],
    matched: Mapping[str, Sequence[Span]],
    summaries: Mapping[str, str] | None,
    tier: TierParams,
    room: int | None,
    c: TokenCounter,
) -> tuple[list[ContextDoc], TierReport]:
    """Tier ``volatile``; under a budget, first lower how many strongest hits read whole.

    Tiering is the gentlest degradation: a whole strongest hit that the budget would clip anyway
    is better tiered (its matched passages, widened, survive intact) than clipped, and clipping the
    top hit loses more than tiering the second. So with ``room`` tokens for documents, ``keep_full``
    steps down (never below ``min_full``) until the tiered set fits; if it still does not, the
    background documents lose their summaries (``drop_summaries_to_fit``); the budget then drops and
    clips what still does not.
    """
    docs, report = tier_documents(
        volatile, texts, matched, summaries=summaries, params=tier, counter=c
    )
    if room is None or not tier.enabled:
        return docs, report
    keep = tier.keep_full
    while keep > tier.min_full and sum(count_blocks(docs, c)) > room:
        keep -= 1
        docs, report = tier_documents(
            volatile,
            texts,
            matched,
            summaries=summaries,
            params=replace(tier, keep_full=keep),
            counter=c,
        )
    if tier.drop_summaries_to_fit and tier.summary_tokens and sum(count_blocks(docs, c)) > room:
        # Still over: a background summary orients, its matched passages hold the evidence, so
        # the summaries go before the budget clips any passage.
        docs, report = tier_documents(
            volatile,
            texts,
            matched,
            summaries={},
            params=replace(tier, keep_full=keep, summary_tokens=0),
            counter=c,
        )
    return docs, report


def _volatile_block(docs: Sequence[ContextDoc], brief_block: str, story_block: str) -> str:
    """The prompt's last system block, the one that changes every turn: the briefing, the
    retrieved material (or a line saying nothing matched), then the story so far."""
    material = (
        "# Retrieved material\n\n" + _material(docs)
        if docs
        else "# Retrieved material\n\n(nothing in the campaign matched this question)"
    )
    return "\n\n".join(part for part in (brief_block, material, story_block) if part)


def build_prompt(
    *,
    instructions: str,
    stable: Sequence[ContextDoc],
    volatile: Sequence[ContextDoc],
    question: str,
    texts: Mapping[str, str] | None = None,
    matched: Mapping[str, Sequence[Span]] | None = None,
    story: str = "",
    recent: Sequence[Message] = (),
    budget: int | None = None,
    tier: TierParams = TierParams(),
    budget_params: BudgetParams = BudgetParams(),
    summaries: Mapping[str, str] | None = None,
    briefing: str = "",
    clip_query: str | None = None,
    counter: TokenCounter | None = None,
) -> Prompt:
    """Tier the volatile documents, fit them to ``budget``, and lay out the prompt.

    Args:
        instructions: system instructions (and campaign overview): the first stable block.
        stable: standing documents (never tiered, dropped or clipped by the budget).
        volatile: the turn's other documents in retrieval order.
        budget: total tokens for the whole prompt; ``None`` means no budget (full fidelity).
        summaries: stored summaries by doc id for tiering (else it makes extractive ones).
        briefing: read before the material (the summaries of the sessions a time question
            names); volatile, and counted against the budget.
        clip_query: what budget clipping keeps close to (default: the question).
    """
    c = counter or default_counter()
    stable_blocks = [instructions]
    if stable:
        stable_blocks.append("# Standing documents\n\n" + _material(stable))
    story_block = f"# The story so far\n\n{story.strip()}" if story.strip() else ""
    brief_block = (
        f"# The sessions this question refers to\n\n{briefing.strip()}" if briefing.strip() else ""
    )
    messages = [*recent, Message("user", question)]
    fixed = [*stable_blocks, story_block, brief_block, *(m.content for m in messages)]
    reserved = 0 if budget is None else sum(c.count(b) for b in fixed if b) + 16
    docs, report = _tier_to_fit(
        volatile,
        texts or {},
        matched or {},
        summaries,
        tier,
        None if budget is None else budget - reserved,
        c,
    )
    fitted: Fitted | None = None
    if budget is not None:
        fitted = fit_budget(
            docs,
            budget,
            reserved=reserved,
            query=clip_query or question,
            params=budget_params,
            counter=c,
            texts=texts,
            matched=matched,
        )
        docs = list(fitted.documents)
    system = (*stable_blocks, _volatile_block(docs, brief_block, story_block))
    tokens = sum(c.count(s) for s in system) + sum(c.count(m.content) for m in messages)
    notes = [f"tiered {len(report.tiered)} background document(s)"] if report.tiered else []
    notes += fitted.notes if fitted is not None else ()
    return Prompt(
        system=system,
        cache_upto=len(stable_blocks),
        messages=tuple(messages),
        stable_documents=tuple(stable),
        documents=tuple(docs),
        tokens=tokens,
        fitted=fitted,
        tiering=report,
        notes=tuple(notes),
    )
