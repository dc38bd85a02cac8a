"""The GM wall's labelled set (bench/data/wall): what the README promises holds today, and the
targets the recogniser of GM intent is built toward (an expected failure until it lands).

Quality lives in ``python -m bench.wall``; these run the same set through the loader alone (no
models, no network, about a second).
"""

from __future__ import annotations

import functools
import re

import pytest

from bench.wall import DATA, TARGETS, Outcome, load_manifest, run_set, score

MANIFEST = load_manifest()
_TOKEN = re.compile(r"cnry-[0-9a-f]{4}")


@functools.cache
def _outcomes() -> dict[str, Outcome]:
    return {o.canary.id: o for o in run_set()}


def test_the_manifest_names_every_canary_once():
    ids = [c.id for c in MANIFEST.canaries]
    assert len(ids) == len(set(ids))
    on_disk = {p: g for p, g in MANIFEST.files.items() if not g}
    found: list[str] = []
    for path in on_disk:
        text = (DATA / "files" / path).read_text(encoding="utf-8")
        found += _TOKEN.findall(text)
        for c in (c for c in MANIFEST.canaries if c.file == path):
            assert text.count(c.id) == 1, (path, c.id)
    assert len(found) == len(set(found))
    listed = {c.id for c in MANIFEST.canaries if c.file in on_disk}
    assert set(found) == listed
    # every file under files/ is in the manifest
    files = {
        p.relative_to(DATA / "files").as_posix() for p in (DATA / "files").rglob("*") if p.is_file()
    }
    assert files == set(on_disk)


def test_the_set_is_the_size_the_issue_asks():
    gm = [c for c in MANIFEST.canaries if c.expected == "gm" and not c.ambiguous]
    probes = [c for c in MANIFEST.canaries if c.expected == "players" and not c.ambiguous]
    assert len(gm) >= 120 and len({c.file for c in gm}) >= 40 and len(probes) >= 60


_DOCUMENTED = [c for c in MANIFEST.canaries if c.form in MANIFEST.documented and c.expected == "gm"]


@pytest.mark.parametrize(
    "canary",
    [
        # A second hidden fence in one document (```gm then ```secret, or two ```gm fences with
        # prose between) once reached players: cnry-0108 and cnry-0704 guard that.
        pytest.param(c, id=f"{c.id}-{c.form}")
        for c in _DOCUMENTED
    ],
)
def test_a_form_the_readme_documents_never_reaches_players(canary):
    o = _outcomes()[canary.id]
    assert o.held, f"{canary.id} ({canary.form}: {canary.marker}) in {canary.file} reached players"
    assert o.read or not canary.gm_reads, f"{canary.id} in {canary.file}: the GM cannot read it"


def test_the_documented_forms_cover_the_readme():
    forms = {c.form for c in _DOCUMENTED}
    assert forms == set(MANIFEST.documented)


def test_recall_and_probes_meet_the_issue_targets():
    s = score(list(_outcomes().values()), MANIFEST.documented)
    assert s["recall"] >= TARGETS["recall"], (s["recall"], s["leaked"][:10])
    assert s["probes_kept"] >= TARGETS["probes_kept"], (s["probes_kept"], s["probes_held"])
