"""The image's files, read as text: CI cannot run Docker, so what the Dockerfile and compose.yaml
promise is checked here, and the commands they call are tested in test_health.py.

Checked: every path the Dockerfile copies exists and survives .dockerignore; dependencies are
installed before the source is copied (layer caching); torch comes from the PyTorch CPU index;
the image runs as a non-root user with /data and /campaigns as volumes and a HEALTHCHECK that is
a real `liminalis` command; the dependency list the Dockerfile extracts is pyproject's; compose
runs the bot alone by default and adds a Milvus server only under its profile; no campaign but
the sample reaches the build context.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib

import yaml
from conftest import ROOT

from bot.cli import _parser

DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))


def instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (last match wins)."""
    verdict = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        keep = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes):
            verdict = not keep
    return verdict


def test_every_copied_path_exists_and_reaches_the_build_context():
    copies = [args.split()[:-1] for word, args in instructions() if word == "COPY"]
    assert copies
    for sources in copies:
        for src in sources:
            assert (ROOT / src).exists(), src
            assert not ignored(src.rstrip("/")), f"{src} is excluded by .dockerignore"
    for secret in (".env", "data/liminalis.sqlite3", "campaigns/my-campaign/gm/plot.md", ".git"):
        assert ignored(secret), secret
    assert not ignored("campaigns/emberfall/campaign.toml")


def test_dependencies_install_before_the_source_is_copied():
    steps = instructions()
    order = [f"{w} {a}" for w, a in steps]
    torch = next(i for i, s in enumerate(order) if "torch==" in s)
    deps = next(i for i, s in enumerate(order) if "pip install -r" in s)
    source = next(i for i, s in enumerate(order) if s.startswith("COPY liminalis/"))
    assert order.index("COPY pyproject.toml ./") < torch <= deps < source
    assert "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in order[torch]
    assert "pip install --no-deps ." in " ".join(order[source:])


def test_the_extracted_requirements_are_pyprojects_dependencies():
    run = next(a for w, a in instructions() if w == "RUN" and "tomllib" in a)
    script = re.search(r'python -c "([^"]+)"', run).group(1)
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    with (ROOT / "pyproject.toml").open("rb") as f:
        assert out == tomllib.load(f)["project"]["dependencies"]


def test_the_image_runs_serve_as_a_user_with_volumes_and_a_real_healthcheck():
    steps = dict(instructions())
    assert steps["USER"] not in {"root", "0"}
    assert steps["VOLUME"] == '["/data", "/campaigns"]'
    env = " ".join(a for w, a in instructions() if w == "ENV")
    for setting in (
        "PYTHONUNBUFFERED=1",
        "HF_HUB_OFFLINE=1",
        "TRANSFORMERS_OFFLINE=1",
        "LIMINALIS_DATA_DIR=/data",
        "LIMINALIS_CAMPAIGNS_DIR=/campaigns",
        "LIMINALIS_MODELS_DIR=/opt/liminalis/models",
    ):
        assert setting in env
    assert "COPY models/ /opt/liminalis/models/" in DOCKERFILE
    check = re.search(r'CMD \["liminalis", "([a-z]+)"\]', steps["HEALTHCHECK"]).group(1)
    assert steps["ENTRYPOINT"] == '["liminalis"]' and steps["CMD"] == '["serve"]'
    commands = _parser()._subparsers._group_actions[0].choices
    assert check == "health" and {"serve", "health", "doctor"} <= set(commands)


def test_compose_runs_the_bot_alone_and_a_milvus_server_only_under_its_profile():
    services = COMPOSE["services"]
    bot = services["bot"]
    assert "profiles" not in bot
    assert {s for s, spec in services.items() if "milvus" in spec.get("profiles", [])} == {
        "milvus",
        "etcd",
        "minio",
    }
    assert bot["depends_on"]["milvus"] == {"condition": "service_healthy", "required": False}
    assert bot["environment"]["LIMINALIS_DATA_DIR"] == "/data"
    assert "data:/data" in bot["volumes"] and any(
        v.endswith(":/campaigns:ro") for v in bot["volumes"]
    )
    milvus = services["milvus"]
    assert milvus["environment"]["ETCD_ENDPOINTS"] == "etcd:2379"
    assert milvus["environment"]["MINIO_ADDRESS"] == "minio:9000"
    assert "LIMINALIS_MILVUS_URI=http://milvus:19530" in (ROOT / "compose.yaml").read_text()
    named = {v.split(":")[0] for spec in services.values() for v in spec.get("volumes", [])}
    assert named - {"./campaigns"} <= set(COMPOSE["volumes"])
