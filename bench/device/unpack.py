"""Rebuild a model dir from the packed parts: slim weights + the base's frozen word embeddings."""
import subprocess, sys, tarfile, shutil
from pathlib import Path
from safetensors.torch import load_file, save_file
src, name, dst = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
parts = sorted(src.glob(f"{name}.tar.*"))
tar = Path(f"/tmp/{name}.joined.tar")
with open(tar, "wb") as out:
    for p in parts:
        out.write(p.read_bytes())
dst.mkdir(parents=True, exist_ok=True)
with tarfile.open(tar) as t:
    t.extractall(dst)
sd = load_file(str(dst / "slim.safetensors"))
k = "embeddings.word_embeddings.weight"
if k not in sd:
    sd[k] = load_file(".gpu/minilm/model.safetensors")[k]
save_file(dict(sorted(sd.items())), str(dst / "model.safetensors"), metadata={"format": "pt"})
(dst / "slim.safetensors").unlink()
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(Path(".gpu/minilm") / f, dst / f)
print(name, "->", dst, sorted(p.name for p in dst.iterdir()))
