"""Relation benchmark: are the relations the map draws and ``/lore entity`` lists true?

    python -m bench.relations [--out relations.json] [--model]

Scores the offline extractor (:func:`liminalis.knowledge.service.extract_view` on every view of
each labelled document, through the public loader) against the gold set in
``bench/data/relations/labels.toml`` (see its README): precision and recall over all relations,
then over those at or above each confidence in a sweep. The threshold the product draws at
(:data:`liminalis.knowledge.entities.DRAW_CONFIDENCE`) is the sweep's point with the best
F0.5 — precision weighed twice recall, since a wrong line on the map misleads the table while a
missing one is only a gap — and the report says whether the constant still is that point.

With ``--model`` and ``ANTHROPIC_API_KEY`` set, the model extractor's validated relations
(:func:`liminalis.knowledge.passes.merge_model_entities`, the same path the ``extract-entities``
pass takes) are scored too; without a key that part is skipped and says so.

Matching: an extracted key matches a gold name when its words are all in the name; symmetric
kinds (``ally-of``, ``enemy-of``, ``sibling-of``, ``kin-of``) match in either direction; a
relation counts once per file (the GM's and the players' views of a file are one document).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from liminalis.adapters.anthropic import AnthropicModel
from liminalis.campaign import CampaignConfig, load_campaign
from liminalis.ingest.loaders import parse_file
from liminalis.knowledge.confidence import DRAW_CONFIDENCE, relation_confidence
from liminalis.knowledge.facts import RelationFact
from liminalis.knowledge.passes import ENTITY_SYSTEM, merge_model_entities
from liminalis.knowledge.service import extract_parts, extract_view
from liminalis.ports import Message
from liminalis.types import Document

__all__ = ["LABELS", "Gold", "load_gold", "extracted", "score", "sweep", "main"]

ROOT = Path(__file__).resolve().parent.parent
LABELS = Path(__file__).resolve().parent / "data" / "relations" / "labels.toml"
CORPORA = {
    "emberfall": ROOT / "campaigns" / "emberfall",
    "fairytaleqa": ROOT.parent / "shared" / "bench" / "fairytaleqa-dev" / "corpus",
}
SYMMETRIC = frozenset({"ally-of", "enemy-of", "sibling-of", "kin-of"})
THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)

#: ``(doc, src, kind, dst)``: one relation of one file.
Rel = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class Gold:
    documents: tuple[str, ...]
    relations: tuple[Rel, ...]


def load_gold(path: Path = LABELS) -> Gold:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rels = tuple((g["doc"], g["src"], g["kind"], g["dst"]) for g in data.get("gold", []))
    return Gold(tuple(data["documents"]), rels)


def _files(documents: Sequence[str]) -> Iterable[tuple[str, Path, str]]:
    """``(doc label, file, campaign-relative path)`` of every labelled document."""
    for spec in documents:
        corpus, _, name = spec.partition(":")
        root = CORPORA[corpus]
        paths = sorted(root.rglob("*.md")) if name == "*" else [root / name]
        for p in paths:
            rel = p.relative_to(root).as_posix() if corpus == "emberfall" else f"lore/{p.name}"
            yield f"{corpus}:{p.relative_to(root).as_posix()}", p, rel


Extractor = Callable[[Document], Sequence[RelationFact]]


def _offline(doc: Document) -> Sequence[RelationFact]:
    return extract_view(doc).relations


def extracted(gold: Gold, extractor: Extractor = _offline) -> dict[Rel, tuple[float, str]]:
    """Every relation the extractor finds in the labelled documents: ``rel → (confidence,
    evidence)``, the highest confidence of the file's views."""
    config: CampaignConfig = load_campaign(CORPORA["emberfall"])
    out: dict[Rel, tuple[float, str]] = {}
    for label, path, rel in _files(gold.documents):
        parsed = parse_file(path.read_bytes(), rel, config)
        for view in parsed.views:
            for r in extractor(view):
                key = (label, r.src, r.kind, r.dst)
                conf = relation_confidence(r)
                if key not in out or out[key][0] < conf:
                    out[key] = (conf, r.evidence)
    return out


def _names_match(key: str, name: str) -> bool:
    words = set(name.split())
    return bool(key.split()) and set(key.split()) <= words


def _matches(found: Rel, gold: Rel) -> bool:
    doc, src, kind, dst = found
    if doc != gold[0] or kind != gold[2]:
        return False
    if _names_match(src, gold[1]) and _names_match(dst, gold[3]):
        return True
    return kind in SYMMETRIC and _names_match(src, gold[3]) and _names_match(dst, gold[1])


def score(found: Iterable[Rel], gold: Sequence[Rel]) -> dict[str, Any]:
    """Precision, recall and F1 of ``found`` against ``gold``, with the misses and the wrong."""
    found = list(found)
    right = [f for f in found if any(_matches(f, g) for g in gold)]
    hit = [g for g in gold if any(_matches(f, g) for f in found)]
    p = len(right) / len(found) if found else 1.0
    r = len(hit) / len(gold) if gold else 1.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    f05 = 1.25 * p * r / (0.25 * p + r) if p + r else 0.0
    return {
        "extracted": len(found),
        "correct": len(right),
        "gold": len(gold),
        "precision": round(p, 3),
        "recall": round(r, 3),
        "f1": round(f1, 3),
        "f0.5": round(f05, 3),
        "wrong": sorted(" | ".join(f) for f in found if f not in right),
        "missed": sorted(" | ".join(g) for g in gold if g not in hit),
    }


def sweep(found: dict[Rel, tuple[float, str]], gold: Sequence[Rel]) -> list[dict[str, Any]]:
    """:func:`score` of the relations at or above each threshold."""
    rows = []
    for t in THRESHOLDS:
        s = score([k for k, (c, _) in found.items() if c >= t], gold)
        rows.append(
            {"threshold": t, **{k: v for k, v in s.items() if k not in {"wrong", "missed"}}}
        )
    return rows


def _model_extractor() -> Extractor | None:
    """The model extractor's relations for one view (the seeded ``extract-entities`` prompt, its
    reply merged and validated as the pass does), or ``None`` without a key."""
    if not os.environ.get("ANTHROPIC_API_KEY"):
        return None

    async def ask(doc: Document) -> Sequence[RelationFact]:
        async with AnthropicModel(os.environ["ANTHROPIC_API_KEY"]) as model:
            reply = await model.complete(
                system=[ENTITY_SYSTEM],
                messages=[Message("user", doc.text[:24_000])],
                max_tokens=1200,
                role="extract",
            )
        m = re.search(r"\{.*\}", reply.text, re.S)
        data = json.loads(m.group(0)) if m else {}
        facts = extract_parts(doc, parts={"entities"})
        return merge_model_entities(facts, doc, data)[0].relations

    return lambda doc: asyncio.run(ask(doc))


def _run(gold: Gold, extractor: Extractor) -> dict[str, Any]:
    found = extracted(gold, extractor)
    rows = sweep(found, gold.relations)
    best = max(rows, key=lambda row: (row["f0.5"], row["threshold"]))
    drawn = score([k for k, (c, _) in found.items() if c >= DRAW_CONFIDENCE], gold.relations)
    return {
        "all": score(found, gold.relations),
        "sweep": rows,
        "best_threshold": best["threshold"],
        "drawn_at": DRAW_CONFIDENCE,
        "drawn": drawn,
        "relations": [
            {"rel": " | ".join(k), "confidence": c, "evidence": e[:160]}
            for k, (c, e) in sorted(found.items())
        ],
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        prog="python -m bench.relations", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--out", default="relations.json", help="under bench/results/ unless a path")
    ap.add_argument(
        "--model", action="store_true", help="score the model extractor too (needs a key)"
    )
    args = ap.parse_args(argv)
    gold = load_gold()
    result: dict[str, Any] = {"gold": len(gold.relations), "offline": _run(gold, _offline)}
    if args.model:
        model = _model_extractor()
        result["model"] = _run(gold, model) if model else "skipped: ANTHROPIC_API_KEY is not set"
    out = Path(args.out)
    out = out if out.parent != Path() else ROOT / "bench" / "results" / out
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    off = result["offline"]
    for name in ("all", "drawn"):
        s = off[name]
        print(
            f"offline {name:5}: P {s['precision']:.3f}  R {s['recall']:.3f}  F1 {s['f1']:.3f}"
            f"  ({s['correct']}/{s['extracted']} correct, {s['gold']} gold)"
        )
    print(f"best F0.5 threshold {off['best_threshold']} (drawn at {off['drawn_at']})")
    for row in off["sweep"]:
        print(
            f"  >= {row['threshold']:.1f}: P {row['precision']:.3f} R {row['recall']:.3f} n {row['extracted']}"
        )
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
