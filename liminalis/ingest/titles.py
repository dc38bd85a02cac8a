"""What a document is called: the name its GM gave it, found the way their tool shows it.

An Obsidian vault names a note by its **file name** ("Session Zero Description.md"), whatever its
first heading says ("World Description"); a folder of kebab-case files (``tobin-harrow.md``) is
named by its heading. A file name *reads as a title* when it holds a space or a capital letter
(the convention of tools that show file names to their reader); then it is the title, else the
first heading is, else the file name made readable. Whichever of the two is not the title stays
an alias, so a question naming either finds the note; a heading that only names a section
("Background", "🔗 Connections") is no name of the note and no alias.

A PDF's metadata title is the book's own name only when it reads as one: a layout tool often
leaves a file name (``magicstyles.qxd:e23.qxd``), its own name, an empty string or mangled
spacing and casing (``Gurps 4Th   Lite``, a converter's ``str.title()``) there instead; then the
file name is the title.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from liminalis.ingest.sections import without_gm_asides

__all__ = ["document_title", "file_title", "pdf_title", "reads_as_title"]

#: A document's first line as an ATX heading: ``# Title``.
_HEADING = re.compile(r"\A\s*#\s+(.+?)\s*#*\s*$", re.M)
#: A metadata title that is a file name: ``report.docx``, ``magicstyles.qxd:e23.qxd``, a path.
_FILE_NAME = re.compile(r"\.[A-Za-z][A-Za-z0-9]{1,4}(?::|$)|[\\/]|^[\w-]+\.[\w-]+$")
#: Names layout and office tools write where the author left the title empty.
_TOOL_NAMES = re.compile(
    r"^(?:microsoft (?:word|powerpoint|excel)\b|untitled|document\s*\d*$|layout\s*\d*$"
    r"|adobe\b|quarkxpress|indesign|acrobat|pdf\b|title$|print$|\d+$)",
    re.I,
)
#: Words of a section heading that opens a note without naming it ("Background", "🔗
#: Connections", "Session Notes"): such a heading is no second name of the note, so it is no alias
#: (an entity page's aliases resolve names: "Background" must not become the character).
_SECTION_WORDS = frozenset(
    "about abilities appearance background backstory bio biography connections contents "
    "description details general goals history info information inventory loot notes overview "
    "personality recap relations relationships session sessions stats summary table the "
    "of and my our".split()
)
#: ``4Th``, ``1St``, ``2Nd``: a converter title-cased an ordinal, so the casing is not the author's.
_TITLED_ORDINAL = re.compile(r"\d(?:St|Nd|Rd|Th)\b")


def reads_as_title(stem: str) -> bool:
    """Whether a file name is written as a title (a space or a capital letter, and a letter)."""
    return any(c.isalpha() for c in stem) and (" " in stem.strip() or stem != stem.lower())


def file_title(rel_path: str) -> str:
    """The title a file name gives: itself when it reads as one, else made readable
    (``the-copper-kettle.md`` → ``The Copper Kettle``). A GM aside in the name (``Villain (GM:
    the duke).md``) is the GM's, never part of a title a player reads."""
    stem = without_gm_asides(PurePosixPath(rel_path).stem).strip() or "Untitled"
    if reads_as_title(stem):
        return " ".join(stem.split())
    return stem.replace("-", " ").replace("_", " ").title()


def _key(title: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", title.lower()).split())


def document_title(declared: str, text: str, rel_path: str) -> tuple[str, tuple[str, ...]]:
    """``(title, aliases)`` of a note: a declared title (front matter) wins; else a file name
    that reads as a title; else the first heading; else the readable file name. The aliases hold
    the first heading and a title-like file name where they are not the title. A GM aside in a
    declared title is the GM's and is cut (the heading comes from the player's view, after the
    wall)."""
    declared = without_gm_asides(declared) if declared.strip() else declared
    m = _HEADING.search(text[:500])
    heading = m.group(1).strip() if m else ""
    stem = PurePosixPath(rel_path).stem
    named = file_title(rel_path) if reads_as_title(stem) else ""
    title = declared.strip() or named or heading or file_title(rel_path)
    aliases: list[str] = []
    for other in (heading if _names_a_note(heading) else "", named):
        if other and _key(other) != _key(title) and _key(other) not in map(_key, aliases):
            aliases.append(other)
    return title, tuple(aliases)


def _names_a_note(heading: str) -> bool:
    """Whether a first heading reads as a name, not as a section ("Background", "Connections")."""
    words = re.findall(r"[a-z]+", heading.lower())
    return bool(words) and not set(words) <= _SECTION_WORDS


def pdf_title(raw: str) -> str:
    """A PDF's metadata title when it is a real title, else ``""`` (the file name is used)."""
    if "  " in raw.strip() or "\t" in raw.strip():
        return ""  # spacing a person does not type into a title field
    title = without_gm_asides(raw)
    if not title or len(title) < 3 or not any(c.isalpha() for c in title):
        return ""
    if _FILE_NAME.search(title) or _TOOL_NAMES.match(title) or _TITLED_ORDINAL.search(title):
        return ""
    return title[:200]
