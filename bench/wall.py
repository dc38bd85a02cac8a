"""GM-wall benchmark: does GM-marked text stay out of the players' view, and players' text in it?

    python -m bench.wall [--out results/wall.json] [--corpus DIR ...] [--no-corpora] [--examples N]

Three measures, all through the public loader API only (:func:`liminalis.ingest.loaders.parse_file`
and the views it returns), so the set measures the general case and not one recogniser:

* **recall** over the labelled set ``bench/data/wall/`` (``manifest.toml`` names every file and
  canary): a GM-marked canary counts when it is *held* (in no view whose visibility holds
  ``players``) and *read by the GM* (in some view). Reported overall, per form and per language,
  with the forms the README documents apart (they work today and a test keeps them so).
* **probes kept**: players' passages (place names such as "The Secret Garden", a rulebook that
  says "the GM" on every line, a recap quoting "the DM said") whose canary must reach a players
  view.
* **false-hold rate** on players' prose: every document of a bench corpus (FairyTaleQA, CRD3)
  parsed as ``lore/<id>.md``, split into paragraphs at blank lines; a paragraph is falsely held
  when, white space normalised, it is no substring of the players' view.

A file the loader refuses (:class:`~liminalis.ingest.formats.LoadError`) holds all its canaries:
they count as held and read (the GM is told why, nothing is published) and the file is listed
under ``refused``; its probes are not kept. Cases reasonable GMs would mark either way are
labelled ``ambiguous``: reported with what happened, left out of both scores.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from liminalis.campaign import CampaignConfig
from liminalis.ingest.formats import LoadError
from liminalis.ingest.loaders import parse_file
from liminalis.text import clean_text

__all__ = [
    "DATA",
    "CORPORA",
    "TARGETS",
    "Canary",
    "Outcome",
    "load_manifest",
    "file_bytes",
    "run_set",
    "score",
    "false_holds",
    "main",
]

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "wall"
CORPORA = (
    ROOT.parent / "shared" / "bench" / "fairytaleqa-dev" / "corpus",
    ROOT.parent / "shared" / "bench" / "crd3-dev" / "corpus",
)
#: The issue's targets.
TARGETS = {"recall": 0.98, "probes_kept": 0.98, "false_hold_rate": 0.005}
_WS = re.compile(r"\s+")
_PARA = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True, slots=True)
class Canary:
    """One labelled passage: ``expected`` is ``gm`` (GM-marked) or ``players`` (a probe)."""

    id: str
    file: str
    form: str
    expected: str
    lang: str = "en"
    marker: str = ""
    note: str = ""
    ambiguous: bool = False
    gm_reads: bool = True


@dataclass(frozen=True, slots=True)
class Outcome:
    canary: Canary
    #: in no players view
    held: bool
    #: in some view
    read: bool
    refused: bool = False

    @property
    def ok(self) -> bool:
        """GM-marked: held and (where the GM must) read. Probe: reached the players."""
        if self.canary.expected == "gm":
            return self.held and (self.read or not self.canary.gm_reads or self.refused)
        return not self.held and not self.refused


@dataclass(frozen=True, slots=True)
class Manifest:
    canaries: tuple[Canary, ...]
    documented: frozenset[str]
    #: path -> generator name, or "" for a file under files/
    files: dict[str, str]


def load_manifest(root: Path = DATA) -> Manifest:
    """The labelled set: ``root/manifest.toml`` and the files it names."""
    raw = tomllib.loads((root / "manifest.toml").read_text(encoding="utf-8"))
    canaries: list[Canary] = []
    files: dict[str, str] = {}
    for path, entry in raw.get("files", {}).items():
        files[path] = str(entry.get("generator", ""))
        for c in entry.get("canaries", []):
            canaries.append(Canary(file=path, **c))
    return Manifest(tuple(canaries), frozenset(raw.get("documented", ())), files)


def config(root: Path = DATA) -> CampaignConfig:
    """A campaign as a GM gets it by default (``gm_paths = ["gm/**"]``)."""
    return CampaignConfig(slug="wallbench", name="Wall bench", root=root / "files")


# ----------------------------------------------------------------- generated Word and PDF files


def _docx_ferryman() -> bytes:
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    d = docx.Document()
    d.add_heading("The Ferryman", level=1)
    p = d.add_paragraph("He crosses the river at dawn with salt and lanterns. cnry-d001 ")
    p.add_run("He drowned in 1102 and has not noticed. cnry-d002").font.hidden = True
    d.add_paragraph("He will carry the dead across for free. cnry-d003").runs[0].font.hidden = True
    p = d.add_paragraph("He charges one copper a head.")
    d.add_comment(
        p.runs,
        text="GM: the coppers are the abbey's tithe tokens. cnry-d004",
        author="GM",
        initials="GM",
    )
    p = d.add_paragraph("The river is wide and slow here. ")
    dele = OxmlElement("w:del")
    for k, v in (("w:id", "901"), ("w:author", "GM"), ("w:date", "2026-01-01T00:00:00Z")):
        dele.set(qn(k), v)
    run, text = OxmlElement("w:r"), OxmlElement("w:delText")
    text.set(qn("xml:space"), "preserve")
    text.text = "The old bridge was burnt by the Quiet Hand. cnry-d005"
    run.append(text)
    dele.append(run)
    p._p.append(dele)
    d.add_heading("GM Notes", level=2)
    d.add_paragraph("The ferry crosses into the land of the dead after midnight. cnry-d006")
    d.add_heading("Fares", level=2)
    d.add_paragraph("One copper; a song on feast days. cnry-d007")
    d.styles.add_style("GM Notes", WD_STYLE_TYPE.PARAGRAPH)
    d.add_paragraph("His pole is the ninth bell's clapper. cnry-d008", style="GM Notes")
    d.add_heading("Her plans (GM)", level=2)
    d.add_paragraph("The Duchess means to buy his ferry. cnry-d009")
    d.add_heading("Crossing", level=2)
    d.add_paragraph("A crossing takes a quarter hour. cnry-d00a")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def _docx_passeur() -> bytes:
    import docx

    d = docx.Document()
    d.add_heading("Le passeur", level=1)
    p = d.add_paragraph("Il traverse le fleuve à l'aube. cnry-d101 ")
    p.add_run("Il est mort noyé en 1102. cnry-d102").font.hidden = True
    d.add_heading("Notes du MJ", level=2)
    d.add_paragraph("Le bac mène au pays des morts après minuit. cnry-d103")
    d.add_heading("Tarifs", level=2)
    d.add_paragraph("Un sou de cuivre par tête. cnry-d104")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def _pdf(pages: Sequence[tuple[str, Sequence[str]]]) -> bytes:
    """A text PDF, one page per ``(bookmark, lines)``; the bookmark is also the page's first line."""
    from pypdf import PdfWriter
    from pypdf.generic import DictionaryObject, NameObject, StreamObject

    w = PdfWriter()
    font = w._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
            }
        )
    )
    for title, lines in pages:
        page = w.add_blank_page(612, 792)
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 720 Td"]
        for line in (title, *lines):
            esc = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({esc}) Tj T*")
        ops.append("ET")
        stream = StreamObject()
        stream.set_data("\n".join(ops).encode("cp1252"))
        page[NameObject("/Contents")] = w._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
    for n, (title, _) in enumerate(pages):
        w.add_outline_item(title=title, page_number=n)
    out = io.BytesIO()
    w.write(out)
    return out.getvalue()


def _pdf_sunken_abbey() -> bytes:
    return _pdf(
        [
            (
                "The Sunken Abbey",
                ["Pilgrims still row out to its bell tower at low tide. cnry-e001"],
            ),
            (
                "GM Notes",
                [
                    "The abbot drowned the abbey himself to hide the ninth bell. cnry-e002",
                    "His ghost rings the bell when anyone nears the undercroft. cnry-e003",
                ],
            ),
            ("Pilgrim Routes", ["Boats leave Gull Rock at dawn. cnry-e004"]),
            (
                "The Abbot (GM)",
                ["He can be laid to rest by ringing the bell nine times. cnry-e005"],
            ),
            ("Secrets", ["The tide tables in the guidebook are wrong on purpose. cnry-e006"]),
        ]
    )


def _docx_lockkeeper() -> bytes:
    """Hidden by a style, not by the run: a character style and a paragraph style whose font is
    Hidden (Word's ``vanish``), one inheriting it through ``basedOn``; names that say nothing."""
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    d = docx.Document()
    quiet = d.styles.add_style("Aside Text", WD_STYLE_TYPE.CHARACTER)
    quiet.font.hidden = True
    still = d.styles.add_style("Margin", WD_STYLE_TYPE.PARAGRAPH)
    still.font.hidden = True
    deeper = d.styles.add_style("Margin Two", WD_STYLE_TYPE.PARAGRAPH)
    deeper.base_style = still
    d.add_heading("The Lockkeeper", level=1)
    p = d.add_paragraph("She keeps the third lock on the canal. cnry-d201 ")
    p.add_run("She sells the lock codes to smugglers. cnry-d202", style="Aside Text")
    d.add_paragraph("Her brother is the smugglers' captain. cnry-d203", style="Margin")
    d.add_paragraph("The canal freezes in the ninth month. cnry-d204", style="Margin Two")
    d.add_paragraph("She whistles when a barge comes. cnry-d205")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


GENERATORS: dict[str, Callable[[], bytes]] = {
    "docx_ferryman": _docx_ferryman,
    "docx_lockkeeper": _docx_lockkeeper,
    "docx_passeur": _docx_passeur,
    "pdf_sunken_abbey": _pdf_sunken_abbey,
}


def file_bytes(path: str, generator: str = "", *, root: Path = DATA) -> bytes:
    """A file of the set: read from ``files/`` or built by its generator."""
    if generator:
        return GENERATORS[generator]()
    return (root / "files" / path).read_bytes()


# ----------------------------------------------------------------------------------- scoring


def _views(raw: bytes, path: str, cfg: CampaignConfig) -> tuple[list[str], list[str]] | None:
    """(players views' texts, all views' texts), or None when the loader refuses the file."""
    try:
        parsed = parse_file(raw, path, cfg)
    except LoadError:
        return None
    players = [v.text for v in parsed.views if "players" in v.visibility]
    return players, [v.text for v in parsed.views]


def run_set(root: Path = DATA, *, only: Iterable[str] | None = None) -> list[Outcome]:
    """Parse every file of the labelled set once and say where each canary went."""
    manifest = load_manifest(root)
    cfg = config(root)
    wanted = set(only) if only is not None else None
    by_file: dict[str, list[Canary]] = defaultdict(list)
    for c in manifest.canaries:
        if wanted is None or c.form in wanted:
            by_file[c.file].append(c)
    outcomes: list[Outcome] = []
    for path, canaries in by_file.items():
        views = _views(file_bytes(path, manifest.files[path], root=root), path, cfg)
        for c in canaries:
            if views is None:
                outcomes.append(Outcome(c, held=True, read=True, refused=True))
                continue
            players, every = views
            outcomes.append(
                Outcome(
                    c,
                    held=not any(c.id in t for t in players),
                    read=any(c.id in t for t in every),
                )
            )
    return outcomes


def _rate(ok: int, n: int) -> float:
    return round(ok / n, 4) if n else 1.0


def score(outcomes: Sequence[Outcome], documented: Iterable[str] = ()) -> dict[str, Any]:
    """Recall, probes kept, per form and per language; the misses by name."""
    documented = set(documented)
    gm = [o for o in outcomes if o.canary.expected == "gm" and not o.canary.ambiguous]
    probes = [o for o in outcomes if o.canary.expected == "players" and not o.canary.ambiguous]

    def group(items: Sequence[Outcome], key: Callable[[Outcome], str]) -> dict[str, dict[str, Any]]:
        rows: dict[str, list[Outcome]] = defaultdict(list)
        for o in items:
            rows[key(o)].append(o)
        return {
            k: {
                "n": len(v),
                "held": sum(o.held for o in v),
                "read": sum(o.read for o in v),
                "ok": sum(o.ok for o in v),
                "rate": _rate(sum(o.ok for o in v), len(v)),
            }
            for k, v in sorted(rows.items())
        }

    def name(o: Outcome) -> dict[str, Any]:
        c = o.canary
        return {
            "id": c.id,
            "file": c.file,
            "form": c.form,
            "lang": c.lang,
            "what": c.marker or c.note,
            "held": o.held,
            "read": o.read,
        }

    doc = [o for o in gm if o.canary.form in documented]
    return {
        "recall": _rate(sum(o.ok for o in gm), len(gm)),
        "held": _rate(sum(o.held for o in gm), len(gm)),
        "gm_marked": len(gm),
        "recall_documented": _rate(sum(o.ok for o in doc), len(doc)),
        "recall_undocumented": _rate(sum(o.ok for o in gm if o not in doc), len(gm) - len(doc)),
        "probes_kept": _rate(sum(o.ok for o in probes), len(probes)),
        "probes": len(probes),
        "files": len({o.canary.file for o in outcomes}),
        "per_form": group(gm, lambda o: o.canary.form),
        "per_lang": group(gm, lambda o: o.canary.lang),
        "probes_per_form": group(probes, lambda o: o.canary.form),
        "leaked": [name(o) for o in gm if not o.held],
        "unread": [name(o) for o in gm if o.held and not o.ok],
        "probes_held": [name(o) for o in probes if not o.ok],
        "refused": sorted({o.canary.file for o in outcomes if o.refused}),
        "ambiguous": [
            {**name(o), "labelled": o.canary.expected, "note": o.canary.note or o.canary.marker}
            for o in outcomes
            if o.canary.ambiguous
        ],
    }


def _norm(text: str) -> str:
    return _WS.sub(" ", clean_text(text)).strip()


def false_holds(corpus: Path, *, examples: int = 8, limit: int | None = None) -> dict[str, Any]:
    """Paragraphs of players' prose missing from the players' view (each one a false hold)."""
    cfg = CampaignConfig(slug="wallprose", name="prose", root=corpus)
    files = sorted(p for p in corpus.rglob("*.md") if p.is_file())[:limit]
    total = held = refused = 0
    shown: list[dict[str, str]] = []
    for f in files:
        doc_id = f.relative_to(corpus).with_suffix("").as_posix()
        raw = f.read_bytes()
        paras = [p for p in (_norm(x) for x in _PARA.split(raw.decode("utf-8-sig"))) if p]
        views = _views(raw, f"lore/{doc_id}.md", cfg)
        if views is None:
            refused += 1
        seen = _norm("\n".join(views[0])) if views else ""
        for p in paras:
            total += 1
            if p not in seen:
                held += 1
                if len(shown) < examples:
                    shown.append({"file": f.name, "paragraph": p[:80]})
    return {
        "documents": len(files),
        "paragraphs": total,
        "held": held,
        "rate": round(held / total, 5) if total else 0.0,
        "refused_files": refused,
        "examples": shown,
    }


# -------------------------------------------------------------------------------------- CLI


def _print(result: dict[str, Any]) -> None:
    s = result["set"]
    print(
        f"labelled set: {s['files']} files, {s['gm_marked']} GM-marked canaries, "
        f"{s['probes']} probes, {len(s['ambiguous'])} ambiguous (left out)"
    )
    print(
        f"recall {s['recall']:.3f} (target ≥ {TARGETS['recall']})  held {s['held']:.3f}  "
        f"documented {s['recall_documented']:.3f}  undocumented {s['recall_undocumented']:.3f}  "
        f"probes kept {s['probes_kept']:.3f} (target ≥ {TARGETS['probes_kept']})"
    )
    print("\n| form | n | held | read | recall |\n|---|---|---|---|---|")
    for form, r in s["per_form"].items():
        star = " *" if form in result["documented"] else ""
        print(f"| {form}{star} | {r['n']} | {r['held']} | {r['read']} | {r['rate']:.2f} |")
    print("(* documented in the README)\n\n| lang | n | recall |\n|---|---|---|")
    for lang, r in s["per_lang"].items():
        print(f"| {lang} | {r['n']} | {r['rate']:.2f} |")
    print("\n| probe form | n | kept |\n|---|---|---|")
    for form, r in s["probes_per_form"].items():
        print(f"| {form} | {r['n']} | {r['rate']:.2f} |")
    documented_leaks = [r for r in s["leaked"] if r["form"] in result["documented"]]
    for title, rows in (
        ("LEAKED, in a form the README documents as hidden", documented_leaks),
        ("probes held", s["probes_held"]),
        ("GM text held but unread", s["unread"]),
    ):
        if rows:
            print(f"\n{title}:")
            for r in rows:
                print(f"  {r['id']} {r['file']} [{r['form']}] {r['what']}")
    if s["refused"]:
        print("\nrefused files: " + ", ".join(s["refused"]))
    print("\nambiguous (labelled side → what happened):")
    for r in s["ambiguous"]:
        side = "held" if r["held"] else "players"
        print(f"  {r['id']} {r['file']} [{r['labelled']}→{side}] {r['note']}")
    for name, fh in result["false_holds"].items():
        print(
            f"\nfalse holds, {name}: {fh['held']}/{fh['paragraphs']} paragraphs "
            f"({100 * fh['rate']:.2f}%, target ≤ {100 * TARGETS['false_hold_rate']:.1f}%) "
            f"over {fh['documents']} documents, {fh['refused_files']} refused"
        )
        for ex in fh["examples"]:
            print(f"  {ex['file']}: {ex['paragraph']}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(prog="python -m bench.wall", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="wall.json", help="under bench/results/ unless a path")
    ap.add_argument(
        "--corpus", action="append", type=Path, help="players' prose (default: dev sets)"
    )
    ap.add_argument("--no-corpora", action="store_true", help="the labelled set only")
    ap.add_argument("--examples", type=int, default=8, help="false holds to show per corpus")
    ap.add_argument("--limit", type=int, default=None, help="documents per corpus (smoke)")
    args = ap.parse_args(argv)
    manifest = load_manifest()
    outcomes = run_set()
    corpora = [] if args.no_corpora else (args.corpus or list(CORPORA))
    fh: dict[str, Any] = {}
    for c in corpora:
        if not c.is_dir():
            print(f"{c}: no such corpus, skipped", file=sys.stderr)
            continue
        fh[c.parent.name if c.name == "corpus" else c.name] = false_holds(
            c, examples=args.examples, limit=args.limit
        )
    result = {
        "targets": TARGETS,
        "documented": sorted(manifest.documented),
        "set": score(outcomes, manifest.documented),
        "false_holds": fh,
        "outcomes": [
            {**asdict(o.canary), "held": o.held, "read": o.read, "refused": o.refused}
            for o in outcomes
        ],
    }
    _print(result)
    out = Path(args.out)
    if out.parent == Path("."):
        out = Path(__file__).resolve().parent / "results" / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {out}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
