#!/bin/bash
# Here, before a device run: fill the git-ignored .gpu/ that the run carries (about 14 MB; the
# tree itself is about 47 MB and a call carries 64 MiB in all, see kit.py for why it is shaped so).
#   .gpu/pools.json.xz  the pools bench.rerank_data mined (train + dev), texts stored once
#   .gpu/wemb.npz       the frozen word embeddings the pools' tokens use, int8
#   .gpu/kit.py, run.sh the device side
# Mining takes about 10 minutes on 2 cores and is kept in bench/.cache/rd: delete that folder
# after the embedder, the ranker or the retrieval settings change.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx "/.gpu/" .git/info/exclude || echo "/.gpu/" >> .git/info/exclude
[ -f bench/.cache/rd/train.jsonl.gz ] || .venv/bin/python -m bench.rerank_data --out bench/.cache/rd \
    --dev ../shared/bench/fairytaleqa-dev ../shared/bench/crd3-dev --quiet
rm -rf .gpu && mkdir -p .gpu
.venv/bin/python bench/device/kit.py data bench/.cache/rd .gpu
cp bench/device/kit.py bench/device/run.sh .gpu/
du -sh .gpu
