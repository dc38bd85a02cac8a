"""Answer benchmark: the answer a player reads, scored end to end.

    python -m bench.answers DIR [DIR ...] [--limit N] [--sweep] [--explain DIR] [--out file.json]

For every query the product's own pipeline answers (``Responder.respond``, players lens, no chat):
retrieval, the prompt, then the offline answerer (or, with ``ANTHROPIC_API_KEY`` set and
``--model``, the reply model, ``--runs`` times over the same prompt, reporting the spread). Scores:

* ``containment``: the share of the gold answer's tokens the reply holds (best gold answer;
  FairytaleQA carries gold answers, CRD3 does not: its queries are summary sentences, so only
  the citation metrics are available there), and ``contains``: the share of replies holding all
  of them;
* ``f1``: token F1 of the gold answer against the reply (SQuAD's: lower case, no punctuation or
  articles);
* ``cite_p`` / ``cite_r``: citation precision and recall of the reply's sources against the
  query's relevant documents;
* ``answered``: the share of answerable questions (the gold evidence reached the prompt) the
  reply answers, and ``silent``: the share of *unanswerable* questions it says the notes do not
  cover. Unanswerable questions follow one fixed rule: the training split's questions (stories and
  episodes no dev set holds: shared/bench/train/README.md), every k-th so that as many are asked
  as the dev set's, through the same pipeline against the dev campaign, i.e. questions of one
  story asked against a campaign made of other stories. The training split is found beside the
  dev set (``../train/<name>-train``) or given with ``--unanswerable``.

``--explain DIR`` writes one file per failing question (FairytaleQA: a gold token missing from
the reply; CRD3: no relevant document cited) saying whether the evidence reached the prompt
(a *synthesis* miss: the answer left it out) or not (a *retrieval* miss), and the bench prints
the split. ``--sweep`` sweeps the offline answerer's sentence choice (``max_quotes``,
``rank_decay``, ``recalled_boost``) and its ``min_evidence`` threshold over the dev sets, each
prompt prepared once; the objective is written in :func:`_objective`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import statistics
import string
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.common import (
    CACHE_DIR,
    BenchSet,
    add_embedder_arg,
    bench_engine,
    detail_hit,
    load_set,
    mean,
    unique_label,
)
from liminalis.answer import Answer, OfflineAnswerer, Responder
from liminalis.answer.offline import OfflineParams, Prepared
from liminalis.context.prompt import Prompt
from liminalis.errors import LiminalisError
from liminalis.ports import Embedder, LanguageModel

__all__ = ["Item", "main", "score_reply", "token_f1", "containment"]

PLAYERS = frozenset({"players"})
_ARTICLES = {"a", "an", "the"}
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "—–“”‘’…"})

#: The grid ``--sweep`` walks (sentence choice); ``min_evidence`` is swept on its own after.
GRID: dict[str, Sequence[float]] = {
    "max_quotes": (1, 2, 3, 4, 6),
    "rank_decay": (0.0, 0.1, 0.3),
    "recalled_boost": (1.0, 1.15),
}
#: The threshold chosen is the highest that still answers this share of the answerable questions
#: on every set: a question the notes do answer must rarely be told they are silent (the balanced
#: optimum, ``(answered + silent) / 2``, is reported beside it).
ANSWERED_FLOOR = 0.9
#: How much of the gold answers' containment a sentence choice may give up for precision.
CONTAINMENT_SLACK = 0.02
THRESHOLDS = (0.0, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8)


def tokens(text: str) -> list[str]:
    """SQuAD's normalisation: lower case, punctuation and articles out, white space split."""
    return [t for t in text.lower().translate(_PUNCT).split() if t not in _ARTICLES]


def containment(gold: str, reply: str) -> float:
    """The share of the gold answer's tokens (with their counts) the reply holds."""
    g, r = tokens(gold), tokens(reply)
    if not g:
        return 0.0
    have: dict[str, int] = {}
    for t in r:
        have[t] = have.get(t, 0) + 1
    hit = 0
    for t in g:
        if have.get(t, 0) > 0:
            have[t] -= 1
            hit += 1
    return hit / len(g)


def token_f1(gold: str, reply: str) -> float:
    """Token F1 of the gold answer against the reply: ``2PR / (P + R)`` over shared tokens."""
    g, r = tokens(gold), tokens(reply)
    if not g or not r:
        return 0.0
    common = containment(gold, reply) * len(g)
    if common == 0:
        return 0.0
    p, rec = common / len(r), common / len(g)
    return 2 * p * rec / (p + rec)


@dataclass
class Item:
    """One query's prompt, prepared once, and what it needs to be scored."""

    query: dict[str, Any]
    prompt: Prompt
    reached: bool  # the gold evidence reached the prompt
    prepared: Prepared


@dataclass
class Scores:
    containment: list[float] = field(default_factory=list)
    contains: list[float] = field(default_factory=list)
    f1: list[float] = field(default_factory=list)
    cite_p: list[float] = field(default_factory=list)
    cite_r: list[float] = field(default_factory=list)
    answered: list[float] = field(default_factory=list)
    silent: list[float] = field(default_factory=list)

    def means(self) -> dict[str, float | None]:
        return {k: (round(mean(v), 4) if v else None) for k, v in asdict(self).items()}


def score_reply(query: dict[str, Any], answer: Answer, scores: Scores) -> bool:
    """Add one reply's scores; whether it succeeded (gold tokens all in it, or, without gold
    answers, a relevant document cited)."""
    relevant = set(query.get("relevant", []))
    cited = {s.doc_id for s in answer.sources}
    if cited:
        scores.cite_p.append(len(cited & relevant) / len(cited))
    scores.cite_r.append(len(cited & relevant) / len(relevant) if relevant else 0.0)
    golds = [a for a in query.get("answers", []) if a.strip()]
    if not golds:
        return bool(cited & relevant)
    c = max(containment(a, answer.text) for a in golds)
    scores.containment.append(c)
    scores.contains.append(float(c == 1.0))
    scores.f1.append(max(token_f1(a, answer.text) for a in golds))
    return c == 1.0


def _answered(answer: Answer) -> bool:
    return answer.answered


def score_items(
    items: Sequence[Item], params: OfflineParams, unanswerable: Sequence[Prepared] = ()
) -> tuple[Scores, list[bool]]:
    """The offline answerer under ``params`` over prepared items (and the unanswerable
    questions' prepared prompts); per item, success."""
    answerer = OfflineAnswerer(params=params)
    scores, ok = Scores(), []
    for it in items:
        answer = answerer.answer_prepared(it.prepared)
        ok.append(score_reply(it.query, answer, scores))
        if it.reached:
            scores.answered.append(float(_answered(answer)))
    for prepared in unanswerable:
        scores.silent.append(float(not _answered(answerer.answer_prepared(prepared))))
    return scores, ok


async def _prompt_of(responder: Responder, slug: str, question: str) -> Prompt | None:
    """The prompt the product builds for ``question`` (None: the engine refused it)."""
    try:
        await responder.respond(slug, question, PLAYERS)
    except LiminalisError:
        print(f"query refused: skipped ({question[:60]!r})", file=sys.stderr)
        return None
    return responder.last_prompt


async def prepare_set(
    bench: BenchSet, responder: Responder, slug: str, *, progress: bool
) -> list[Item]:
    """Each query through the product's pipeline (retrieval, prompt) once, prepared."""
    items: list[Item] = []
    t0 = time.perf_counter()
    for n, q in enumerate(bench.queries):
        prompt = await _prompt_of(responder, slug, q["query"])
        if prompt is None:
            continue
        prepared = responder.offline.prepare(q["query"], prompt.all_documents)
        items.append(Item(q, prompt, detail_hit(q, prompt.text()), prepared))
        if progress and (n + 1) % 50 == 0:
            print(
                f"  {bench.name}: {n + 1}/{len(bench.queries)}, {time.perf_counter() - t0:.0f}s",
                file=sys.stderr,
            )
    return items


async def prepare_unanswerable(
    questions: Sequence[str], responder: Responder, slug: str
) -> list[Prepared]:
    """Questions the campaign cannot answer, each through the pipeline, prepared."""
    out = []
    for question in questions:
        prompt = await _prompt_of(responder, slug, question)
        if prompt is not None:
            out.append(responder.offline.prepare(question, prompt.all_documents))
    return out


def unanswerable_questions(dev: Path, given: Path | None, n: int) -> list[str]:
    """Every k-th of the training split's questions, ``n`` of them (the rule in the module's
    docstring); none when no training split is found."""
    root = dev.resolve()
    train = given or root.parent / "train" / root.name.replace("-dev", "-train")
    if not (train / "queries.jsonl").is_file():
        print(
            f"[{dev.name}] no training split at {train}: silent rate not measured", file=sys.stderr
        )
        return []
    lines = [ln for ln in (train / "queries.jsonl").read_text(encoding="utf-8").splitlines() if ln]
    step = max(1, len(lines) // max(1, n))
    return [str(json.loads(ln)["query"]) for ln in lines[::step][:n]]


def _objective(per_set: dict[str, Scores]) -> float:
    """What the sentence-choice sweep maximises: over the sets, the mean of the answer metrics
    each set carries (containment and F1 where gold answers exist) and citation F1."""
    parts: list[float] = []
    for s in per_set.values():
        if s.f1:
            parts += [mean(s.containment), mean(s.f1)]
        p, r = mean(s.cite_p), mean(s.cite_r)
        parts.append(2 * p * r / (p + r) if p + r else 0.0)
    return mean(parts)


def sweep(
    sets: dict[str, list[Item]], silent: dict[str, list[Prepared]], base: OfflineParams
) -> dict[str, Any]:
    """Sentence choice over :data:`GRID` (every answer quoted: ``min_evidence`` 0): the best
    :func:`_objective` among the settings that keep the gold answers' containment within
    :data:`CONTAINMENT_SLACK` of ``base``'s sentence choice on every set carrying gold answers
    (fewer quotes cite more precisely, but a player must still read the answer). Then the
    threshold: the highest keeping :data:`ANSWERED_FLOOR` on every set of questions (the sets
    carrying gold answers: CRD3's queries are two-sentence wiki summaries, which no one sentence
    covers, so its rates are reported, not held to the floor)."""
    rows = []
    for values in itertools.product(*GRID.values()):
        kw = dict(zip(GRID, values, strict=True))
        params = replace(
            base,
            max_quotes=int(kw["max_quotes"]),
            rank_decay=kw["rank_decay"],
            recalled_boost=kw["recalled_boost"],
            min_evidence=0.0,
        )
        per = {name: score_items(items, params)[0] for name, items in sets.items()}
        means = {n: {k: v for k, v in sc.means().items() if v is not None} for n, sc in per.items()}
        rows.append({**kw, "objective": round(_objective(per), 4), "sets": means})
    ref = _row(rows, base)
    near = [
        r
        for r in rows
        if all(
            r["sets"][n].get("containment", 0.0) >= v["containment"] - CONTAINMENT_SLACK
            for n, v in ref["sets"].items()
            if "containment" in v
        )
    ]
    best = max(near or rows, key=lambda r: r["objective"])
    chosen = replace(
        base,
        max_quotes=int(best["max_quotes"]),
        rank_decay=best["rank_decay"],
        recalled_boost=best["recalled_boost"],
    )
    thresholds = []
    for t in THRESHOLDS:
        per = {
            name: score_items(items, replace(chosen, min_evidence=t), silent[name])[0]
            for name, items in sets.items()
        }
        ans = {n: round(mean(s.answered), 4) for n, s in per.items()}
        sil = {n: round(mean(s.silent), 4) for n, s in per.items()}
        balanced = mean([(ans[n] + sil[n]) / 2 for n in per])
        thresholds.append(
            {"min_evidence": t, "answered": ans, "silent": sil, "balanced": round(balanced, 4)}
        )
    questions = [n for n, items in sets.items() if any(it.query.get("answers") for it in items)]
    kept = [
        r
        for r in thresholds
        if min((r["answered"][n] for n in questions or list(sets)), default=1.0) >= ANSWERED_FLOOR
    ]
    top = max(kept or thresholds[:1], key=lambda r: r["min_evidence"])
    return {
        "grid": rows,
        "best_choice": best,
        "thresholds": thresholds,
        "balanced_best": max(thresholds, key=lambda r: r["balanced"]),
        "chosen": asdict(replace(chosen, min_evidence=top["min_evidence"])),
    }


def _row(rows: Sequence[dict[str, Any]], p: OfflineParams) -> dict[str, Any]:
    """The grid row of ``p``'s sentence choice (the first row when it is not on the grid)."""
    for r in rows:
        if (r["max_quotes"], r["rank_decay"], r["recalled_boost"]) == (
            p.max_quotes,
            p.rank_decay,
            p.recalled_boost,
        ):
            return r
    return rows[0]


def explain(
    name: str, items: Sequence[Item], ok: Sequence[bool], params: OfflineParams, out: Path | None
) -> dict[str, int]:
    """The failures split into retrieval misses and synthesis misses (one file each in ``out``)."""
    answerer = OfflineAnswerer(params=params)
    split = {"retrieval": 0, "synthesis": 0}
    for it, good in zip(items, ok, strict=True):
        if good:
            continue
        kind = "synthesis" if it.reached else "retrieval"
        split[kind] += 1
        if out is None:
            continue
        answer = answerer.answer_prepared(it.prepared)
        q = it.query
        in_prompt = [d.doc_id for d in it.prompt.all_documents]
        why = (
            "the evidence reached the prompt; the answer left it out"
            if it.reached
            else "the evidence never reached the prompt"
        )
        text = "\n".join(
            [
                f"# {q.get('id')}: {kind} miss",
                "",
                f"question: {q['query']}",
                f"gold answers: {q.get('answers', [])}",
                f"relevant: {q.get('relevant', [])}",
                f"in the prompt: {in_prompt}",
                f"relevant in the prompt: {[d for d in q.get('relevant', []) if d in in_prompt]}",
                f"cited: {[s.doc_id for s in answer.sources]}",
                f"verdict: {kind} miss ({why})",
                "",
                "## reply",
                "",
                answer.text,
            ]
        )
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(q.get("id")))
        (folder / f"{safe}.md").write_text(text + "\n", encoding="utf-8")
    return split


async def model_runs(
    bench: BenchSet, engine: Any, slug: str, model: LanguageModel, runs: int
) -> dict[str, Any]:
    """The reply model over the set ``runs`` times (same prompts: the pipeline is
    deterministic up to the model), each run's means and their spread."""
    per_run = []
    for _ in range(runs):
        responder = Responder(engine, model=model, knowledge_enabled=True)
        scores = Scores()
        for q in bench.queries:
            try:
                answer = await responder.respond(slug, q["query"], PLAYERS)
            except LiminalisError:
                continue
            score_reply(q, answer, scores)
        per_run.append(scores.means())
    keys = per_run[0].keys() if per_run else []
    spread = {}
    for k in keys:
        vals = [r[k] for r in per_run if r[k] is not None]
        if vals:
            spread[k] = {
                "mean": round(mean(vals), 4),
                "min": min(vals),
                "max": max(vals),
                "stdev": round(statistics.pstdev(vals), 4),
            }
    return {"runs": per_run, "spread": spread}


def _model() -> LanguageModel | None:
    key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
    if not key:
        return None
    from liminalis.adapters.anthropic import AnthropicModel

    return AnthropicModel(key, base_url=os.environ.get("ANTHROPIC_BASE_URL") or None)


async def _main(
    args: argparse.Namespace, embedder: Embedder | None, cache_dir: Path
) -> dict[str, Any]:
    from liminalis.models import load_embedder, load_learned_ranker, load_reranker

    if embedder is None:
        embedder = load_embedder(args.embedder)
    ranker, reranker = load_learned_ranker(args.ranker), load_reranker(args.reranker)
    base = OfflineParams()
    before = OfflineParams(max_quotes=4, rank_decay=0.1, recalled_boost=1.15, min_evidence=0.0)
    sets: dict[str, list[Item]] = {}
    silent: dict[str, list[Prepared]] = {}
    results: dict[str, Any] = {"sets": {}, "limit": args.limit}
    model = _model() if args.model else None
    given = list(args.unanswerable or [])
    for i, d in enumerate(args.dirs):
        bench = load_set(d, limit=args.limit)
        label = unique_label(bench, sets)
        async with bench_engine(
            bench,
            embedder=embedder,
            cache_dir=cache_dir,
            progress=not args.quiet,
            ranker=ranker,
            reranker=reranker,
        ) as (engine, slug):
            responder = Responder(engine, offline=OfflineAnswerer(params=base))
            sets[label] = await prepare_set(bench, responder, slug, progress=not args.quiet)
            asked = unanswerable_questions(
                d, given[i] if i < len(given) else None, len(bench.queries)
            )
            silent[label] = await prepare_unanswerable(asked, responder, slug)
            if model is not None:
                results["sets"].setdefault(label, {})["model"] = await model_runs(
                    bench, engine, slug, model, args.runs
                )
    if args.sweep:
        results["sweep"] = sweep(sets, silent, before)
    for label, items in sets.items():
        entry = results["sets"].setdefault(label, {})
        entry["queries"], entry["unanswerable"] = len(items), len(silent[label])
        for tag, params in (("before", before), ("after", base)):
            scores, ok = score_items(items, params, silent[label])
            entry[tag] = {
                "params": asdict(params),
                **scores.means(),
                "explain": explain(
                    label, items, ok, params, args.explain if tag == "after" else None
                ),
            }
    return results


def _table(results: dict[str, Any]) -> str:
    cols = ("containment", "contains", "f1", "cite_p", "cite_r", "answered", "silent")
    lines = [f"{'set':<18} {'run':<7} " + " ".join(f"{c:>11}" for c in cols) + "  misses r/s"]
    for label, entry in results["sets"].items():
        for tag in ("before", "after"):
            r = entry.get(tag)
            if not r:
                continue
            vals = " ".join(f"{r[c]:>11.3f}" if r[c] is not None else f"{'n/a':>11}" for c in cols)
            e = r["explain"]
            lines.append(f"{label:<18} {tag:<7} {vals}  {e['retrieval']}/{e['synthesis']}")
    return "\n".join(lines)


def main(
    argv: Sequence[str] | None = None,
    *,
    embedder: Embedder | None = None,
    cache_dir: Path = CACHE_DIR,
) -> dict[str, Any]:
    """Run the benchmark; ``embedder`` and ``cache_dir`` are injectable for the smoke test."""
    ap = argparse.ArgumentParser(
        prog="python -m bench.answers", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument(
        "--limit", type=int, help="the first N queries of each set (say so when reporting)"
    )
    ap.add_argument("--out", type=Path)
    ap.add_argument("--explain", type=Path, help="write one file per failing question here")
    ap.add_argument("--sweep", action="store_true", help="sweep the offline answerer's settings")
    ap.add_argument(
        "--model", action="store_true", help="also score the reply model (needs ANTHROPIC_API_KEY)"
    )
    ap.add_argument("--runs", type=int, default=3, help="model runs, for the spread")
    ap.add_argument(
        "--unanswerable",
        nargs="*",
        type=Path,
        help="per set, in order: a set whose questions the dev set cannot answer (default: "
        "../train/<name>-train beside it)",
    )
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--ranker", default="auto")
    ap.add_argument("--reranker", default="auto")
    add_embedder_arg(ap)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    results = asyncio.run(_main(args, embedder, cache_dir))
    print(_table(results))
    if "sweep" in results:
        sw = results["sweep"]
        print("best sentence choice:", sw["best_choice"])
        for t in sw["thresholds"]:
            print(
                f"  min_evidence {t['min_evidence']:.2f}: answered {t['answered']} silent {t['silent']} balanced {t['balanced']}"
            )
        print("chosen:", sw["chosen"])
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
