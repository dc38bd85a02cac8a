#!/bin/bash
# Here, before a device run: fill the git-ignored .gpu/ that the run carries (about 58 MB).
#   .gpu/minilm  the bundled all-MiniLM-L6-v2 in fp16 (the training base; 45 MB)
#   .gpu/rd      pools mined by bench.rerank_data (train + dev; about 13.5 MB)
# The carry limit is 64 MiB including the working tree (about 23 MB with models/reranker):
# over it, cut the base (fewer layers) or leave the dev pools out.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx "/.gpu/" .git/info/exclude || echo "/.gpu/" >> .git/info/exclude
mkdir -p .gpu
cp bench/device/pack.py bench/device/unpack.py bench/device/run.sh .gpu/
.venv/bin/python - <<'PY'
import torch
from transformers import AutoModel, AutoTokenizer
from liminalis.adapters.sentence_transformers import resolve_model_path
p = resolve_model_path("bundled:all-MiniLM-L6-v2")
AutoModel.from_pretrained(p, add_pooling_layer=False, dtype=torch.float32).half().save_pretrained(".gpu/minilm")
AutoTokenizer.from_pretrained(p).save_pretrained(".gpu/minilm")
PY
[ -f .gpu/rd/train.jsonl.gz ] || .venv/bin/python -m bench.rerank_data --out .gpu/rd --dev ../shared/bench/fairytaleqa-dev ../shared/bench/crd3-dev --quiet
du -sh .gpu
