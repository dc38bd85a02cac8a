"""A campaign folder of hostile files around good ones, for "one bad file never stops a campaign".

Most files are tiny, so the folder stays small on disk: the files over the size limit are sparse
(their size is a ``truncate``, not written bytes), and only ``big_line`` writes one large file.
Each good file holds a made-up word no other file has, so a question naming that word must find
that file, and only a file that was indexed can be found.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

GM_CANARY = "the ferryman secretly serves the drowned court"

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu", "xa", "po")


def word(n: int) -> str:
    """A made-up word, different for every ``n``, that no dictionary or other file holds."""
    out = "vor"
    while True:
        n, r = divmod(n, len(_SYLLABLES))
        out += _SYLLABLES[r]
        if n == 0:
            return out + "th"


@dataclass
class HostileCampaign:
    root: Path
    #: campaign-relative path → the made-up word only that (indexable) file holds
    good: dict[str, str] = field(default_factory=dict)
    #: campaign-relative path → a fragment of the reason it must be skipped with
    bad: dict[str, str] = field(default_factory=dict)
    #: good files only the GM may read (in ``gm/``), by path
    gm_only: set[str] = field(default_factory=set)


def _good_text(w: str, n: int) -> str:
    return (
        f"# Place {n}\n\nThe {w} lies beside the river. Travellers rest at the {w} before dawn.\n"
    )


def make_hostile_campaign(
    campaigns_dir: Path,
    *,
    slug: str = "hostile",
    files: int = 2000,
    big_line: bool = False,
    seed: int = 7,
) -> HostileCampaign:
    """``files`` files: three in four bad in every way the loader knows, the rest good but odd
    (deep folders, long and strange names, no sentence ends, a byte-order mark, CRLF, hidden
    sections, GM-only) or plain, plus, with ``big_line``, one good 5 MB file on a single line."""
    rng = random.Random(seed)
    root = campaigns_dir / slug
    (root / "gm").mkdir(parents=True, exist_ok=True)
    (root / "campaign.toml").write_text('name = "Hostile"\nlenses = ["mirel"]\n', encoding="utf-8")
    c = HostileCampaign(root=root)
    n = 0

    def good(rel: str, text: str | bytes | None = None) -> None:
        nonlocal n
        w = word(n)
        body = _good_text(w, n) if text is None else text
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body.replace(b"{w}", w.encode()))
        else:
            path.write_text(body.replace("{w}", w), encoding="utf-8")
        c.good[rel] = w
        n += 1

    def bad(rel: str, raw: bytes, reason: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        c.bad[rel] = reason

    # Deep nesting: a path of over 600 characters (the id that once failed a whole campaign).
    deep = "/".join(f"chapter-{i:02d}-the-long-road-north" for i in range(20))
    for i in range(5):
        good(f"{deep}/stop-{i}.md")
    # Long names: a 240-character file name, alone and under the deep folders.
    for i in range(3):
        good(f"names/{'l' * 230}-{i:03d}.md")
        good(f"{deep}/{'m' * 230}-{i:03d}.md")
    # Two long paths that share their first 500 characters must stay two documents.
    good(f"{deep}/{'s' * 200}-twin-a.md")
    good(f"{deep}/{'s' * 200}-twin-b.md")
    # Names an id or a query expression must survive.
    for name in ('the "bell"', "100% proof", "back\\slash", "Vex'ahlia", "café", "🙂 smile"):
        good(f"odd/{name}.md")
    # A long path with a quote: its escaped vector ids are the longest ones.
    good(f'{deep}/{"q" * 60}"{"%" * 40}.md')
    # A hidden section in a long path: its views (//gm) must fit too; the GM's canary stays GM's.
    good(
        f"{deep}/hidden.md",
        f"# Ferry\n\nThe {{w}} ferry crosses at dusk.\n\n> [!gm]\n> {GM_CANARY}.\n\n"
        f"<!-- lens:mirel Mirel knows the {{w}} toll. -->\n",
    )
    # No sentence ends at all, a byte-order mark, CRLF line ends.
    for i in range(3):
        filler = " ".join(rng.choice(("river", "stone", "marsh", "bell")) for _ in range(4000))
        good(f"prose/run-on-{i}.md", f"the {{w}} {filler} the {{w}} again")
    good("prose/bom.md", b"\xef\xbb\xbf---\ntitle: Bom\n---\nThe {w} has a mark.\n")
    good("prose/crlf.md", b"# Crlf\r\n\r\nThe {w} ends lines twice.\r\n")
    # GM-only lore.
    for i in range(10):
        rel = f"gm/plot-{i}.md"
        good(rel, f"# Plot {i}\n\nThe {{w}} is where {GM_CANARY}.\n")
        c.gm_only.add(rel)
    if big_line:
        # 5 MB on one line, under the 5 MiB limit: indexed, slowly but whole.
        filler = " ".join(rng.choice(("river", "stone", "marsh", "bell")) for _ in range(1_000_000))
        good("big/one-line.md", "the {w} " + filler[:4_999_000])

    target_bad = files * 3 // 4
    kinds = (
        ("binary", lambda i: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(32), "binary"),
        # (Windows-1252 text is read, not refused: liminalis.ingest.formats detects it.)
        ("nul", lambda i: b"text\x00" * 64 + os.urandom(16), "binary"),
        ("empty", lambda i: b"  \n\n", "empty"),
        ("frontonly", lambda i: b"---\ntitle: Nothing\n---\n", "empty"),
        ("brokenfront", lambda i: b"---\ntitle: [unclosed\n---\nBody text.", "front matter"),
        ("image", lambda i: b"\x89PNG", "unsupported"),
    )
    for i in range(target_bad - len(c.bad) - 6):
        kind, raw, reason = kinds[i % len(kinds)]
        suffix = ".png" if kind == "image" else ".md"
        bad(f"bad/{kind}/{kind}-{i:04d}{suffix}", raw(i), reason)
    # Over the size limit, sparse: no disk is written for them.
    for i in range(3):
        path = root / "bad" / "huge" / f"huge-{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            f.truncate(6 * 1024 * 1024)
        c.bad[f"bad/huge/huge-{i}.md"] = "too large"
    # Two files, one id: the second is reported.
    good("dupes/same.md")
    bad("dupes/same.txt", b"The same id as same.md.\n", "same name")
    # A symlink loop.
    loop = root / "bad" / "loop.md"
    loop.symlink_to(loop)
    c.bad["bad/loop.md"] = "unreadable"
    bad("bad/deep" + "/x" * 10 + "/invalid.md", b"\xff\xfe\xfd not text", "binary")

    while len(c.good) + len(c.bad) < files:
        good(f"lore/{len(c.good) // 100:02d}/place-{len(c.good):04d}.md")
    return c
