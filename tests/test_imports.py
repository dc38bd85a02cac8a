"""The engine is platform-free: no platform or heavy SDK imports outside liminalis/adapters/."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"discord", "slack_bolt", "slack_sdk", "pymilvus", "sentence_transformers", "anthropic", "torch", "aiohttp", "httpx"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_engine_imports_no_platform_or_heavy_sdk():
    offenders = {}
    for path in (ROOT / "liminalis").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("liminalis/adapters/"):
            continue
        bad = imported_roots(path) & FORBIDDEN
        if bad:
            offenders[rel] = sorted(bad)
    assert offenders == {}


def test_rule_catches_a_violation(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("import discord\nfrom pymilvus import MilvusClient\n")
    assert imported_roots(f) & FORBIDDEN == {"discord", "pymilvus"}


def test_engine_reads_no_environment():
    for path in (ROOT / "liminalis").rglob("*.py"):
        assert "os.environ" not in path.read_text(), path
