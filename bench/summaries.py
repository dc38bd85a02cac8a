"""Summary quality on bench sets whose queries are chunks of human summaries (CRD3-style).

For every corpus document (a transcript window) that has aligned gold chunks (queries whose
``relevant`` lists it), the window is summarised offline (:func:`liminalis.knowledge.summaries.summarize`)
and, when a language model is configured (``ANTHROPIC_API_KEY``, optional
``ANTHROPIC_BASE_URL``), by the model too. Each summary is scored against the concatenated gold
chunks of its window:

* ROUGE-L F (Lin, 2004) over lower-cased word tokens, with ``L = LCS(summary, gold)``::

      P = L / |summary|,  R = L / |gold|,  F = 2PR / (P + R)

* entity recall: the share of the gold chunks' named entities (capitalised names,
  :func:`liminalis.memory.entities.name_spans`, keyed by :func:`liminalis.knowledge.entities.name_key`)
  whose words all occur in the summary;
* tokens: the summary's length (:func:`liminalis.context.tokens.count_tokens`).

Means over windows. ``python -m bench.summaries DIR… [--out results.json] [--limit N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import load_set, mean
from liminalis.context.tokens import count_tokens
from liminalis.knowledge.entities import name_key
from liminalis.knowledge.summaries import MODEL, summarize, summarize_with_model
from liminalis.memory.entities import name_spans
from liminalis.ports import LanguageModel
from liminalis.types import Document

__all__ = ["rouge_l", "entity_recall", "gold_windows", "run", "main"]

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_l(summary: str, gold: str) -> float:
    """ROUGE-L F1 over lower-cased word tokens (see the module)."""
    s, g = tokens(summary), tokens(gold)
    lcs = _lcs(s, g)
    if not lcs:
        return 0.0
    p, r = lcs / len(s), lcs / len(g)
    return 2 * p * r / (p + r)


def gold_entities(gold: str) -> set[str]:
    """Name keys of the capitalised names in ``gold`` (sentence openers with them)."""
    return {k for k in (name_key(n.surface) for n in name_spans(gold)) if len(k) > 2}


def entity_recall(summary: str, gold: str) -> float | None:
    """Share of ``gold``'s names whose words all occur in ``summary`` (None: gold names none)."""
    names = gold_entities(gold)
    if not names:
        return None
    have = set(tokens(summary.replace("'", " ")))
    return sum(all(w in have for w in n.split()) for n in names) / len(names)


def gold_windows(root: Path, *, limit: int | None = None) -> list[tuple[Document, str]]:
    """``(window, concatenated gold chunks)`` for each corpus document with aligned chunks."""
    bench_set = load_set(root)
    chunks: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for q in bench_set.queries:
        for doc_id in q.get("relevant", []):
            chunks[str(doc_id)].append((str(q["id"]), str(q["query"])))
    out = []
    for doc_id in sorted(chunks):
        path = bench_set.corpus / f"{doc_id}.md"
        if not path.exists():
            continue
        raw = path.read_text(encoding="utf-8")
        title, _, body = raw.partition("\n")
        doc = Document(
            doc_id=doc_id,
            path=f"{doc_id}.md",
            title=title.lstrip("# ").strip(),
            text=body.strip(),
            visibility=frozenset({"players"}),
        )
        gold = " ".join(text for _, text in sorted(chunks[doc_id]))
        out.append((doc, gold))
    if limit and len(out) > limit:
        step = len(out) / limit
        out = [out[int(i * step)] for i in range(limit)]
    return out


def _score(rows: list[tuple[str, str]]) -> dict[str, Any]:
    recalls = [r for r in (entity_recall(s, g) for s, g in rows) if r is not None]
    return {
        "rougeL": round(mean([rouge_l(s, g) for s, g in rows]), 4),
        "entity_recall": round(mean(recalls), 4),
        "tokens": round(mean([count_tokens(s) for s, _ in rows]), 1),
        "gold_tokens": round(mean([count_tokens(g) for _, g in rows]), 1),
        "windows": len(rows),
    }


async def run(
    dirs: Sequence[Path],
    *,
    limit: int | None = None,
    model: LanguageModel | None = None,
    model_limit: int = 40,
    progress: bool = True,
) -> dict[str, dict[str, Any]]:
    """Scores per set: ``{"offline": {...}, "model": {...} | {"skipped": why}}``."""
    results: dict[str, dict[str, Any]] = {}
    for root in dirs:
        t0 = time.perf_counter()
        windows = gold_windows(Path(root), limit=limit)
        offline = [(summarize(doc).text, gold) for doc, gold in windows]
        entry: dict[str, Any] = {"offline": _score(offline)}
        entry["offline"]["seconds"] = round(time.perf_counter() - t0, 2)
        if model is None:
            entry["model"] = {"skipped": "no language model configured (ANTHROPIC_API_KEY)"}
        else:
            sample = windows[:: max(1, len(windows) // model_limit)][:model_limit]
            made = [(await summarize_with_model(doc, model), gold) for doc, gold in sample]
            entry["model"] = _score([(s.text, g) for s, g in made])
            entry["model"]["fallbacks"] = sum(s.method != MODEL for s, _ in made)
        results[Path(root).name] = entry
        if progress:
            print(f"{Path(root).name}: {len(windows)} windows", file=sys.stderr)
    return results


def print_table(results: dict[str, dict[str, Any]]) -> None:
    print(
        f"{'set':<18}{'variant':<9}{'ROUGE-L':>9}{'ent.rec':>9}{'tokens':>8}{'gold tok':>9}{'n':>5}"
    )
    for name, entry in results.items():
        for variant, row in entry.items():
            if "skipped" in row:
                print(f"{name:<18}{variant:<9}  skipped: {row['skipped']}")
                continue
            print(
                f"{name:<18}{variant:<9}{row['rougeL']:>9.3f}{row['entity_recall']:>9.3f}"
                f"{row['tokens']:>8.0f}{row['gold_tokens']:>9.0f}{row['windows']:>5}"
            )


async def _main(args: argparse.Namespace) -> None:
    model: LanguageModel | None = None
    key = os.environ.get("ANTHROPIC_API_KEY", "")
    if key and not args.offline_only:
        from liminalis.adapters.anthropic import AnthropicModel

        model = AnthropicModel(key, base_url=os.environ.get("ANTHROPIC_BASE_URL") or None)
    results = await run(
        [Path(d) for d in args.dirs], limit=args.limit, model=model, model_limit=args.model_limit
    )
    print_table(results)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", help="bench set folders (shared/bench format)")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--limit", type=int, default=None, help="score at most N windows per set")
    ap.add_argument("--model-limit", type=int, default=40, help="windows the model summarises")
    ap.add_argument("--offline-only", action="store_true", help="skip the model variant")
    asyncio.run(_main(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
