"""Pack a trained model dir for the trip back: drop the frozen word embeddings (identical to the
carried fp16 base), tar the rest, split into <=15 MiB parts."""
import os, subprocess, sys, tarfile
from pathlib import Path
from safetensors.torch import load_file, save_file
src, name, out = Path(sys.argv[1]), sys.argv[2], Path(os.environ["OUT"])
sd = load_file(str(src / "model.safetensors"))
base = load_file(".gpu/minilm/model.safetensors")
k = "embeddings.word_embeddings.weight"
same = bool((sd[k] == base[k]).all())
print(name, "word embeddings unchanged:", same, flush=True)
if same:
    del sd[k]
save_file(sd, str(src / "slim.safetensors"))
tmp = Path("/tmp") / f"{name}.tar"
with tarfile.open(tmp, "w") as t:
    for f in sorted(src.iterdir()):
        if f.name not in {"model.safetensors", "tokenizer.json", "tokenizer_config.json"}:
            t.add(f, arcname=f.name)
subprocess.run(["split", "-b", "15M", "-d", str(tmp), str(out / f"{name}.tar.")], check=True)
print(name, "packed", tmp.stat().st_size, flush=True)
