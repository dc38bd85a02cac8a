"""Fine-tune the bi-encoder (the dense arm's embedder) on the training split.

    python -m bench.train_embedder --examples DIR/train.jsonl.gz --out models/embedder

Why: the bundled all-MiniLM-L6-v2 loses badly to BM25 on narrative text, and the learned ranker
leans on the dense arm's features (its two largest weights are a lexical and a dense one). A
dense arm that knows this kind of question lifts the pool every later stage sees.

Data: the pools ``bench.rerank_data`` mined with the product's own hybrid retrieval. Each query
is paired with the passage of its relevant document that holds the evidence, and with one hard
negative drawn from the pool's other-document passages; every other passage in the batch is an
in-batch negative (multiple-negatives ranking loss), except passages of a document relevant to
that query.

Held out: whole training groups (default about half: fairytaleqa-train-g3, g4 and crd3-train-g1,
g2, g3). The embedder never sees them, so the learned ranker is fit on those groups with dense
features that are not in-sample (stacking without leakage), and validated on its own held-out
pair among them (fairytaleqa-train-g4, crd3-train-g3). Validation = MRR of the evidence passage among its pool's negatives on held-out
queries. No dev or evaluation set is read.

The word embeddings stay frozen (too few questions to move a 30k-word table). The output is a
plain sentence-transformers folder: ``LIMINALIS_EMBEDDER=<folder>`` uses it, and because its
``model_id`` names its weights, every campaign is then re-embedded in full on its next ingest;
no collection ever mixes vectors from two models.

Status: shipped as models/embedder (see its README for the run). With dropout off (the default;
dropout drops attention off the fused kernel on CPU), a step of batch 32 at 256 tokens takes about
6 s on 2 CPU cores: two epochs over 5,834 questions ran in 39 minutes and lifted held-out
validation MRR from 0.421 to 0.563. A GPU runs more epochs or a larger base in minutes. A
fine-tuned embedder makes the shipped query adapter inapplicable (it records the model it was fit
for), and the learned ranker must be refit on its dense features
(``bench.train_ranker --embedder DIR --only <groups the embedder held out>``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Pair", "load_pairs", "train", "main"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOLDOUT = (
    "fairytaleqa-train-g3",
    "fairytaleqa-train-g4",
    "crd3-train-g1",
    "crd3-train-g2",
    "crd3-train-g3",
)


@dataclass
class Pair:
    query: str
    positive: str
    positive_doc: str
    negatives: list[str]
    relevant: frozenset[str]
    group: str  # training group, e.g. fairytaleqa-train-g0


def load_pairs(path: Path) -> list[Pair]:
    from bench.rerank_data import read

    rows, passages = read(path)
    out = []
    for r in rows:
        rel = frozenset(r["relevant"])
        negs = [passages[k] for k, d in zip(r["pool"], r["docs"]) if d not in rel]
        pos_doc = r["positive"].split("/", 1)[-1].split("#", 1)[0]
        if negs:
            out.append(
                Pair(
                    r["query"],
                    passages[r["positive"]],
                    pos_doc,
                    negs,
                    rel,
                    r["group"].split("/", 1)[0],
                )
            )
    return out


def _frozen_word_embeddings(model: Any) -> None:
    model[0].auto_model.embeddings.word_embeddings.weight.requires_grad_(False)


def _encode(model: Any, texts: list[str], *, batch: int = 64) -> Any:
    import torch

    with torch.no_grad():
        return model.encode(
            texts,
            batch_size=batch,
            convert_to_tensor=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )


def evaluate(model: Any, pairs: list[Pair]) -> float:
    """MRR of each held-out query's evidence passage among its pool's other-document passages."""
    texts = sorted({t for p in pairs for t in [p.positive, *p.negatives]})
    index = {t: i for i, t in enumerate(texts)}
    vecs = _encode(model, texts)
    qv = _encode(model, [p.query for p in pairs])
    total = 0.0
    for i, p in enumerate(pairs):
        cand = [index[p.positive]] + [index[t] for t in p.negatives]
        s = vecs[cand] @ qv[i]
        total += 1.0 / (1 + int((s[1:] > s[0]).sum()))
    return total / max(1, len(pairs))


def _features(model: Any, texts: list[str]) -> Any:
    feats = model.tokenize(texts)
    return {k: v for k, v in feats.items()}


def train(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    from tqdm import tqdm

    from liminalis.adapters.sentence_transformers import resolve_model_path

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)

    pairs = load_pairs(args.examples)
    holdout = set(args.holdout)
    train_pairs = [p for p in pairs if p.group not in holdout]
    val_pairs = [p for p in pairs if p.group in holdout]
    rng = random.Random(args.seed)
    rng.shuffle(train_pairs)
    rng.shuffle(val_pairs)
    if args.max_queries:
        train_pairs = train_pairs[: args.max_queries]
    val_pairs = val_pairs[: args.max_val]

    model = SentenceTransformer(resolve_model_path(args.init), device="cpu")
    model.max_seq_length = args.max_length
    _frozen_word_embeddings(model)
    t0 = time.time()
    val_before = evaluate(model, val_pairs) if val_pairs else float("nan")
    eval_s = time.time() - t0
    if not args.quiet:
        print(
            f"validation MRR before: {val_before:.4f} ({len(val_pairs)} held-out queries, {eval_s:.0f} s)",
            file=sys.stderr,
        )

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    steps_per_epoch = math.ceil(len(train_pairs) / args.batch)
    total = steps_per_epoch * args.epochs
    warm = max(1, int(0.1 * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            min(1.0, (s + 1) / warm) * max(0.0, (total - s) / max(1, total - warm))
            if s >= warm
            else (s + 1) / warm
        ),
    )
    # Dropout off by default: on CPU, attention with dropout leaves the fused SDPA kernel for a
    # math path, and a forward+backward step of 64 passages x 256 tokens goes from ~6 s to ~17 s;
    # a run of a few epochs over a few thousand questions does not need that regulariser.
    model.train(args.dropout)
    bar = tqdm(total=total, desc="train embedder", unit="step", file=sys.stderr, disable=args.quiet)
    step, losses = 0, []
    epoch_val: list[float] = []
    best_state: dict[str, Any] | None = None
    t0 = time.time()
    for epoch in range(args.epochs):
        order = list(range(len(train_pairs)))
        rng.shuffle(order)
        for b in range(0, len(order), args.batch):
            batch = [train_pairs[i] for i in order[b : b + args.batch]]
            negs = [rng.choice(p.negatives) for p in batch]
            q = model(_features(model, [p.query for p in batch]))["sentence_embedding"]
            d = model(_features(model, [p.positive for p in batch] + negs))["sentence_embedding"]
            q = torch.nn.functional.normalize(q, dim=-1)
            d = torch.nn.functional.normalize(d, dim=-1)
            scores = args.scale * (q @ d.T)
            # A passage of a document relevant to query i is not a negative for it.
            n = len(batch)
            docs = [p.positive_doc for p in batch] + [None] * n
            mask = torch.zeros_like(scores, dtype=torch.bool)
            for i, p in enumerate(batch):
                for j, doc in enumerate(docs):
                    if j != i and doc is not None and doc in p.relevant:
                        mask[i, j] = True
            scores = scores.masked_fill(mask, -1e4)
            loss = torch.nn.functional.cross_entropy(scores, torch.arange(n))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            step += 1
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}", epoch=epoch + 1)
        if val_pairs and args.epochs > 1:
            # Checkpoint choice on the held-out training groups only (never a dev set).
            model.eval()
            epoch_val.append(round(evaluate(model, val_pairs), 4))
            if epoch_val[-1] >= max(epoch_val):
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.train(args.dropout)
            if not args.quiet:
                print(f"\nepoch {epoch + 1}: validation MRR {epoch_val[-1]:.4f}", file=sys.stderr)
    bar.close()
    train_s = time.time() - t0
    model.eval()
    if best_state is not None:
        model.load_state_dict(best_state)
    val_after = (
        max(epoch_val) if epoch_val else (evaluate(model, val_pairs) if val_pairs else float("nan"))
    )
    if not args.quiet:
        print(f"validation MRR after: {val_after:.4f}", file=sys.stderr)
    report = {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "command": "python -m bench.train_embedder " + " ".join(argv),
        "train_queries": len(train_pairs),
        "val_queries": len(val_pairs),
        "steps": step,
        "seconds": round(train_s, 1),
        "val_mrr_before": round(val_before, 4),
        "val_mrr_after": round(val_after, 4),
        "val_mrr_by_epoch": epoch_val,
        "best_epoch": (epoch_val.index(max(epoch_val)) + 1) if epoch_val else args.epochs,
        "loss_first20": round(float(np.mean(losses[:20])), 4) if losses else None,
        "loss_last20": round(float(np.mean(losses[-20:])), 4) if losses else None,
    }
    save(model, args.out, base=args.init, half=args.half)
    (args.out / "training.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def save(model: Any, out: Path, *, base: str, half: bool) -> None:
    """Write a sentence-transformers folder any loader reads (``half``: fp16 weights, half the
    size; the product's embedder upcasts them on CPU)."""
    import copy

    out.mkdir(parents=True, exist_ok=True)
    m = copy.deepcopy(model).half() if half else model
    m.save(str(out))
    (out / "liminalis_base.txt").write_text(base + "\n")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--examples", type=Path, required=True, help="train.jsonl.gz written by bench.rerank_data"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "models" / "embedder")
    ap.add_argument("--init", default="bundled:all-MiniLM-L6-v2")
    ap.add_argument(
        "--holdout",
        nargs="*",
        default=list(DEFAULT_HOLDOUT),
        help="training groups never trained on",
    )
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--max-val", type=int, default=200)
    ap.add_argument("--max-length", type=int, default=256, help="the product embeds at 256 tokens")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--scale", type=float, default=20.0, help="cosine similarity scale of the loss")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--half", action="store_true", help="store fp16 weights (default fp32)")
    ap.add_argument(
        "--dropout",
        action="store_true",
        help="train with dropout (about 3x slower per step on CPU)",
    )
    ap.add_argument("--quiet", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    report = train(args, argv)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
