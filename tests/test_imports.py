"""The engine is platform-free: no platform or heavy SDK imports outside liminalis/adapters/."""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "discord",
    "slack_bolt",
    "slack_sdk",
    "pymilvus",
    "sentence_transformers",
    "anthropic",
    "torch",
    "aiohttp",
    "httpx",
}


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


# A statement keyword, then (within one literal) the word that makes it SQL rather than prose.
_SQL = re.compile(
    r"\b(?:SELECT\b[\s\S]*\bFROM|INSERT\b[\s\S]*\bINTO|UPDATE\b\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(?:TABLE|INDEX|UNIQUE\s+INDEX|VIEW|TRIGGER)|DROP\s+(?:TABLE|INDEX)|ALTER\s+TABLE|PRAGMA\s+\w+)\b"
)
SQL_ROOTS = ("liminalis", "bot", "bench")


def sql_literals(path: Path) -> list[tuple[int, str]]:
    """String literals (f-strings' text parts included) of ``path`` that read as SQL."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return sorted(
        (node.lineno, node.value[:80])
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _SQL.search(node.value)
    )


def test_no_sql_outside_the_store():
    """Every SQL statement lives in ``liminalis/store/``, behind a repository: a query written
    elsewhere bypasses its error translation and the schema's migrations. (Tests may poke the
    database directly; they are not scanned.)"""
    offenders = {}
    for root in SQL_ROOTS:
        for path in (ROOT / root).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("liminalis/store/"):
                continue
            if found := sql_literals(path):
                offenders[rel] = found
    assert offenders == {}


def test_sql_rule_catches_a_violation(tmp_path):
    f = tmp_path / "x.py"
    f.write_text(
        'a = "SELECT doc_id FROM pins WHERE campaign = ?"\n'
        'b = f"DELETE FROM pins WHERE scope IN ({marks})"\n'
        'c = ("INSERT OR IGNORE INTO recap_posts "\n     "VALUES (?, ?)")\n'
        'd = "UPDATE channel_links SET guild_id = ?"\n'
        'e = "CREATE TABLE IF NOT EXISTS t (x)"\n'
        'ok = "Select a campaign from the list, then update the index."\n'
    )
    assert [line for line, _ in sql_literals(f)] == [1, 2, 3, 5, 6]


def _py(folder: str):
    return [p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]


def test_layers_import_downward_only():
    """The engine never imports the adapters or the tooling; the product never imports bench."""
    offenders = {}
    for folder, banned in (("liminalis", {"bot", "bench"}), ("bot", {"bench"})):
        for path in _py(folder):
            bad = imported_roots(path) & banned
            if bad:
                offenders[path.relative_to(ROOT).as_posix()] = sorted(bad)
    assert offenders == {}


def test_environment_is_read_in_settings_only():
    readers = [
        p.relative_to(ROOT).as_posix()
        for folder in ("liminalis", "bot")
        for p in _py(folder)
        if ("os.environ" in p.read_text() or "getenv(" in p.read_text()) and p.name != "settings.py"
    ]
    assert readers == []


# The engine's insides, reached through an attribute of an engine object.
_INSIDE = re.compile(r"\bengine\.(db|retriever|indexer|store)\b|(?<!research)\.catalog\(")


def _inside_offenders(folder: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in _py(folder):
        hits = [m.group(0) for m in _INSIDE.finditer(path.read_text())]
        if hits:
            out[path.relative_to(ROOT).as_posix()] = hits
    return out


def test_adapters_and_tooling_reach_the_engine_through_its_facade():
    """``bot/`` and ``bench/`` call the Engine facade; the bench's research harnesses go through
    ``liminalis/research.py``, the one seam onto the engine's insides."""
    assert _inside_offenders("bot") == {}
    assert _inside_offenders("bench") == {}


def test_the_facade_rule_catches_a_violation(tmp_path, monkeypatch):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "x.py").write_text("cat = await engine.retriever.catalog(slug)\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _inside_offenders("bench") == {"bench/x.py": ["engine.retriever", ".catalog("]}
