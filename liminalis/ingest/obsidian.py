"""What an Obsidian vault's own settings say is not campaign material: its templates folder.

A vault keeps note templates ("# Session {{title}}", empty Recap and Loot headings) in the
folder its Templates or Templater plugin names. Ingested, each is a note of placeholders that a
question about sessions finds before the real sessions. The folder is read from the vault's
settings (``.obsidian/templates.json``'s ``folder``, Templater's ``templates_folder``), never
guessed from a name: a GM's folder that happens to be called ``Templates`` and is not configured
as one is campaign material like any other.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path, PurePosixPath

__all__ = ["template_folders"]

_log = logging.getLogger(__name__)

#: ``(settings file under .obsidian/, the key naming the folder)``.
_SETTINGS = (
    ("templates.json", "folder"),
    ("plugins/templater-obsidian/data.json", "templates_folder"),
)


def _folder(value: object) -> str:
    """A configured folder as a vault-relative POSIX path, or ``""`` when it names none."""
    if not isinstance(value, str):
        return ""
    path = PurePosixPath(value.strip().strip("/"))
    if not path.parts or ".." in path.parts or path.is_absolute():
        return ""
    return path.as_posix()


def template_folders(root: Path) -> frozenset[str]:
    """Vault-relative folders ``root``'s Obsidian settings name as template folders."""
    out: set[str] = set()
    for name, key in _SETTINGS:
        try:
            loaded = json.loads((root / ".obsidian" / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # no such plugin, or settings it cannot read: nothing is skipped
        folder = _folder(loaded.get(key) if isinstance(loaded, dict) else None)
        if folder and folder != ".":
            out.add(folder)
    if out:
        _log.debug("skipping %d Obsidian template folder(s)", len(out))
    return frozenset(out)
