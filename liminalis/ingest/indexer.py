"""Incremental ingest: load, chunk, diff by content hash, embed what is new, swap atomically.

Order of writes per batch of documents, chosen so a SIGKILL at any point leaves the campaign
searchable on its previous state and a re-run completes it:

1. embed new texts (cached by content hash in SQLite — unchanged text is never re-embedded);
2. upsert the new vectors into the campaign's collection and flush;
3. commit each document's new passage set in one SQLite transaction;
4. after all documents, delete removed documents, then garbage-collect vectors that no current
   passage refers to.

Searches join vector hits against SQLite's current passages, so vectors written in step 2 of an
interrupted run are invisible until step 3 commits, and stale ones are ignored until step 4.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.metadata
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import numpy as np

from liminalis.campaign import CampaignConfig
from liminalis.context.rolling import forget_hidden
from liminalis.errors import StoreError
from liminalis.ingest.chunking import ChunkingParams, chunk_document, content_hash, make_windows
from liminalis.ingest.loaders import (
    BINARY_SUFFIXES,
    SUPPORTED_SUFFIXES,
    LoadError,
    ParsedFile,
    doc_id_for,
    load_file,
    needs_escaped_ids,
    sidecar_of,
    source_of,
)
from liminalis.ingest.obsidian import template_folders
from liminalis.ingest.sections import find_hidden_sections
from liminalis.ingest.synopsis import contextual_text, extractive_synopsis, title_text
from liminalis.ingest.syntaxes import comment_gate
from liminalis.lens import GM
from liminalis.ports import Embedder, VectorRecord, VectorStore
from liminalis.store.rows import FileRow
from liminalis.store.sqlite import Database
from liminalis.text import Tokenizer
from liminalis.types import Document, FileReport, IngestReport, Passage, SkippedFile
from liminalis.workers import run_cpu

__all__ = ["Indexer", "IngestOptions", "sources_digest", "vector_id"]

_log = logging.getLogger(__name__)
_SKIP_NAMES = {"campaign.toml"}
#: The content hash of a document re-prepared from its stored copy because its file failed to
#: load during a rebuild. Not empty, so the document is not re-prepared again while the file stays
#: broken; never a real hash, so the file's next good version replaces it.
_KEPT = "kept"
KEPT_NOTE = "its previous version stays searchable"


@dataclass(frozen=True, slots=True)
class IngestOptions:
    contextual: bool = True
    #: Also embed overlapping sentence windows of each passage. Off by default: windows lift the
    #: bundled embedder's dense arm alone but not the tuned hybrid (bench/RESULTS.md), and they
    #: triple the collection, which is what a vector search costs. Turn on with a stronger
    #: embedder whose dense arm carries weight in the fusion.
    windows: bool = False
    max_bytes: int = 5 * 1024 * 1024
    batch_docs: int = 24
    #: A file changed less than this long ago is read at every ingest, whatever its stat says
    #: (file times are coarse: the comment on file rows above ``_reader_key``).
    racy_s: float = 2.0
    chunking: ChunkingParams = ChunkingParams()


_ID_ESCAPES = {"%": "%25", '"': "%22", "\\": "%5C"}
_ID_UNESCAPE = re.compile("%(" + "|".join(v[1:] for v in _ID_ESCAPES.values()) + ")")
_ID_UNESCAPES = {v[1:]: k for k, v in _ID_ESCAPES.items()}


def vector_id(kind: str, owner: str, text_hash: str) -> str:
    """Vector ids carry the embedded text's hash, so a changed context gives a new row.

    An owner with ``"`` or ``\\`` (:func:`needs_escaped_ids`) has them and ``%`` percent-escaped,
    and its kind letter in upper case to say so; every other id is as it always was."""
    if needs_escaped_ids(owner):
        owner = "".join(_ID_ESCAPES.get(ch, ch) for ch in owner)
        return f"{kind[0].upper()}:{owner}:{text_hash[:10]}"
    return f"{kind[0]}:{owner}:{text_hash[:10]}"


def _owner_part(vid: str) -> tuple[str, str]:
    """(lower-case kind prefix, the owner text unescaped) of a vector id."""
    kind, rest = vid[:2], vid[2:].rsplit(":", 1)[0]
    if kind[:1].isupper():
        return kind.lower(), _ID_UNESCAPE.sub(lambda m: _ID_UNESCAPES[m.group(1)], rest)
    return kind, rest


def vector_owner(vid: str) -> str:
    """What a vector belongs to: its passage id (a sentence window's too), or itself for a title
    vector. Parsed from the right: a document id may hold ':' '#' or '@' (``contact@guild.md``,
    ``Act 1: Prologue.md``)."""
    kind, rest = _owner_part(vid)
    if kind == "t:":
        return vid
    return rest.rsplit("@", 1)[0] if kind == "w:" else rest


def vector_doc(vid: str) -> str:
    """The document id a vector belongs to (passage ids are ``{doc_id}#{hash}``)."""
    kind, rest = _owner_part(vid)
    if kind == "t:":
        return rest
    return vector_owner(vid).rsplit("#", 1)[0]


#: The id of the row that probes whether the store takes rows at all (``Indexer._write``).
_PROBE_ID = "x:probe:0000000000"


def unbacked_documents(passages_by_doc: dict[str, list[str]], vectors: set[str]) -> set[str]:
    """Documents (with passages) that lack a passage vector or their title vector among
    ``vectors``: what a store emptied, damaged or recreated no longer holds. Sentence windows are
    not checked: a document that lost only those keeps its passage vectors."""
    passages: set[str] = set()
    titled: set[str] = set()
    for vid in vectors:
        kind = vid[:2].lower()
        if kind == "p:":
            passages.add(vector_owner(vid))
        elif kind == "t:":
            titled.add(vector_doc(vid))
    return {
        doc
        for doc, pids in passages_by_doc.items()
        if pids and (doc not in titled or not passages.issuperset(pids))
    }


def _by_doc(vectors: Iterable[str]) -> dict[str, set[str]]:
    """doc id → its vector ids (worker thread)."""
    out: dict[str, set[str]] = {}
    for vid in vectors:
        out.setdefault(vector_doc(vid), set()).add(vid)
    return out


def _gated(doc: Document) -> str:
    """A stored document's text as the wall reads it for its file's format."""
    return comment_gate(doc.text, PurePosixPath(doc.path).suffix)


def _batches(files: list[list[Document]], size: int) -> Iterator[list[list[Document]]]:
    """Files in batches of about ``size`` documents, a file's views never split across two (a
    file is indexed, or skipped, whole)."""
    batch: list[list[Document]] = []
    count = 0
    for views in files:
        batch.append(views)
        count += len(views)
        if count >= size:
            yield batch
            batch, count = [], 0
    if batch:
        yield batch


# A file as an ingest last read it is a :class:`~liminalis.store.rows.FileRow`: its stat
# signature, the reader it was read with, the views it gave ``(doc id, content hash)`` and its
# report. While all four still hold (the stored views are at those hashes, none lacks vectors),
# reading and parsing the file again would give the same documents, so the tick skips it. Rows
# live in memory per process and in SQLite (``db.files``), so a restart's first tick skips too.
#
# The signature is ``(st_mtime_ns, st_size, st_ino, st_ctime_ns, st_dev)``, taken before the
# file is read: an edit during the read moves it, and the next run reads the file again. A PDF's
# or Word file's signature also holds its upload sidecar's (or says it has none): the sidecar
# decides who may read the file, and a host may edit or delete it alone. A file changed within
# ``IngestOptions.racy_s`` of that moment gets no signature (it is read every time until it is
# older): file times come from a coarse clock, and two writes of one size within one tick of it
# leave the same signature ("racy" files, as git calls them). The reader is this code and the
# campaign's configuration: a deploy that changes any of the package's sources or a library that
# parses files, or a changed ``campaign.toml``, reads every file once (a fix to how hidden
# sections or visibility are read must reach files nobody edits).

#: The distributions whose behaviour decides what a file reads as.
_READER_LIBRARIES = ("PyYAML", "charset-normalizer", "pypdf", "python-docx", "lxml")


def _reader_key(config: CampaignConfig) -> str:
    """The reader a file row was made with (the comment above); reads the package's sources
    the first time (a worker's job)."""
    return hashlib.sha256(f"{_code_version()}|{config!r}".encode()).hexdigest()[:32]


def sources_digest(root: Path, libraries: Sequence[str]) -> str:
    """A digest of every ``.py`` file under ``root`` (path and bytes) and of the installed
    versions of ``libraries``."""
    h = hashlib.sha256()
    for src in sorted(root.rglob("*.py")):
        h.update(src.relative_to(root).as_posix().encode() + b"\0" + src.read_bytes() + b"\0")
    for dist in libraries:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        h.update(f"{dist}={version}\0".encode())
    return h.hexdigest()[:32]


@functools.cache
def _code_version() -> str:
    """This code as a file reader: the ``liminalis`` package's sources and the parsing
    libraries' versions (read once per process)."""
    return sources_digest(Path(__file__).resolve().parent.parent, _READER_LIBRARIES)


def _signatures(files: Sequence[tuple[Path, str]], racy_s: float) -> dict[str, tuple[int, ...]]:
    """``rel → stat signature`` of every file that can be stat'ed and was not changed in the
    last ``racy_s`` seconds, nor was its sidecar (the file rows' comment above; worker thread)."""
    settled = time.time_ns() - int(racy_s * 1e9)
    out: dict[str, tuple[int, ...]] = {}
    for fpath, rel in files:
        try:
            st = fpath.stat()
            sig: tuple[int, ...] = (
                st.st_mtime_ns,
                st.st_size,
                st.st_ino,
                st.st_ctime_ns,
                st.st_dev,
            )
            changed = max(st.st_mtime_ns, st.st_ctime_ns)
            if fpath.suffix.lower() in BINARY_SUFFIXES:
                try:
                    side = sidecar_of(fpath).stat()
                except FileNotFoundError:
                    sig += (-1,)
                else:
                    sig += (side.st_mtime_ns, side.st_size, side.st_ino, side.st_ctime_ns)
                    changed = max(changed, side.st_mtime_ns, side.st_ctime_ns)
        except (OSError, ValueError):
            continue
        if changed < settled:
            out[rel] = sig
    return out


#: Files handled between two yields to the event loop in ingest's per-file loop (a tick over
#: thousands of unchanged files must not hold the loop for the whole walk).
_YIELD_EVERY = 256


@dataclass(slots=True)
class _Prepared:
    doc: Document
    passages: list[Passage]
    records: list[tuple[str, str, str, str, str]]  # (vector id, kind, passage_id, text, hash)
    tokens: dict[str, str]


@dataclass(slots=True)
class _Run:
    """One ingest's state, handed down its phases (the way httpx hands one request down
    ``send`` → ``_send_handling_auth`` → ``_send_handling_redirects``): what SQLite and the
    store held when it opened, and what the run decided and did since."""

    config: CampaignConfig
    path: Path | None
    dim: int
    #: doc id → (path, content hash), as the run opened.
    stored: dict[str, tuple[str, str]]
    stored_visibility: dict[str, frozenset[str]]
    stored_by_doc: dict[str, list[str]]
    #: The store's ids when the run had to read them (see ``Indexer._verify_store``).
    existing_vectors: set[str] | None
    #: Documents whose vectors the store lacks: re-prepared as if edited.
    unbacked: set[str]
    report: IngestReport = field(default_factory=IngestReport)
    files: list[tuple[Path, str]] = field(default_factory=list)
    #: The campaign-relative scope whose vanished files are deletions ("" for all).
    scope_rel: str = ""
    seen: set[str] = field(default_factory=set)
    #: Per file: the views to (re-)index.
    todo: list[list[Document]] = field(default_factory=list)
    first_of: dict[str, str] = field(default_factory=dict)
    #: File id → the stored documents read from it.
    views_of: dict[str, list[str]] = field(default_factory=dict)
    #: Files read this run: a stored view they no longer have goes …
    loaded: set[str] = field(default_factory=set)
    #: … and a stored document of their path under another id.
    loaded_paths: set[str] = field(default_factory=set)
    file_reports: dict[str, FileReport] = field(default_factory=dict)
    signatures: dict[str, tuple[int, ...]] = field(default_factory=dict)
    reader: str = ""
    was_seen: dict[str, FileRow] = field(default_factory=dict)
    now_seen: dict[str, FileRow] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)
    held_by_doc: dict[str, set[str]] = field(default_factory=dict)
    stored_tokens: dict[str, str] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        return self.config.slug


def _moved(
    ready: list[list[_Prepared]], stored_visibility: dict[str, frozenset[str]]
) -> dict[str, frozenset[str]]:
    """Documents whose visibility changed → the visibility they had. Their vector rows are
    rewritten (same text, same ids, or the store would go on filtering them by the old
    visibility), and the chat memories of lenses that lost them forget."""
    return {
        prep.doc.doc_id: was
        for f in ready
        for prep in f
        if (was := stored_visibility.get(prep.doc.doc_id)) is not None
        and was != prep.doc.visibility
    }


def _rows(
    f: list[_Prepared],
    vectors: dict[str, np.ndarray],
    held: set[str],
    moved: dict[str, frozenset[str]],
) -> list[VectorRecord]:
    """One file's vector rows to upsert: those the store lacks, and all of a moved document's."""
    return [
        VectorRecord(
            id=vid,
            passage_id=pid,
            doc_id=prep.doc.doc_id,
            kind=kind,
            visibility=prep.doc.visibility,
            vector=vectors[h],
        )
        for prep in f
        for vid, kind, pid, _text, h in prep.records
        if vid not in held or prep.doc.doc_id in moved
    ]


def _count_passages(run: _Run, prep: _Prepared, fresh: set[str]) -> None:
    """A committed document's passages (added, removed, unchanged) and freshly computed
    vectors into the run's and its file's reports; ``fresh`` loses the hashes counted, so a
    vector shared by two documents counts once."""
    report = run.report
    old = set(run.stored_by_doc.get(prep.doc.doc_id, []))
    new = {p.passage_id for p in prep.passages}
    report.passages_added += len(new - old)
    report.passages_removed += len(old - new)
    report.passages_unchanged += len(new & old)
    report.documents_repaired += prep.doc.doc_id in run.unbacked
    if (fr := run.file_reports.get(prep.doc.doc_id)) is not None:
        fr.changed = min(len(new - old), len(old - new))
        fr.added, fr.removed = len(new - old) - fr.changed, len(old - new) - fr.changed
        fr.unchanged = len(new & old)
    for _vid, kind, _pid, _text, h in prep.records:
        if h in fresh:
            fresh.discard(h)  # count each computed vector once
            if kind == "passage":
                report.embedded += 1
            elif kind == "window":
                report.windows_embedded += 1


class Indexer:
    """Ingests a campaign folder into SQLite and the vector store."""

    def __init__(
        self,
        db: Database,
        store: VectorStore,
        embedder: Embedder,
        *,
        tokenizer: Tokenizer = Tokenizer(),
        options: IngestOptions = IngestOptions(),
    ) -> None:
        self.db = db
        self.store = store
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.options = options
        #: slug → rel path → the file as last read (read from ``db.files`` on first use).
        self._seen: dict[str, dict[str, FileRow]] = {}
        #: slug → the collection (store key and profile) whose every id this process last read.
        self._verified: dict[str, str] = {}

    @staticmethod
    def _walk(root: Path, scope: Path, prefix: str) -> Iterable[tuple[Path, str]]:
        """Files under ``scope`` (which must lie in ``root``) with their campaign-relative paths.

        A symlink to a file inside the campaign is that file's path (``lore/plan.md`` linking to
        ``gm/plan.md`` is in the GM folder: GM-only). A symlink to lore outside the campaign is
        ingested where the link sits, instead of failing the whole ingest. A vault's configured
        template folder is not campaign material (:mod:`liminalis.ingest.obsidian`)."""
        real_root = root.resolve()
        base = scope.resolve().relative_to(real_root).as_posix()
        if scope.is_file():
            yield scope, prefix + base
            return
        templates = template_folders(root)
        for dirpath, dirnames, filenames in os.walk(scope):
            dirnames[:] = sorted(
                d
                for d in dirnames
                if not d.startswith(".")
                and Path(os.path.relpath(Path(dirpath) / d, root)).as_posix() not in templates
            )
            for name in sorted(filenames):
                if name.startswith(".") or name in _SKIP_NAMES:
                    continue
                fpath = Path(dirpath) / name
                try:
                    rel = fpath.resolve().relative_to(real_root).as_posix()
                except (ValueError, OSError, RuntimeError):
                    # Outside the campaign; or a link loop, or a path too long to resolve (the
                    # file then fails to load, alone, instead of failing the whole walk).
                    rel = fpath.relative_to(scope).as_posix()
                    rel = rel if base == "." else f"{base}/{rel}"
                yield fpath, prefix + rel

    def _scope(
        self, config: CampaignConfig, path: Path | None
    ) -> tuple[list[tuple[Path, str]], str]:
        """Files to ingest and the campaign-relative scope whose vanished files are deletions."""
        roots: list[tuple[Path, str]] = [(config.root, "")]
        if config.uploads_root is not None:
            roots.append((config.uploads_root, "uploads/"))
        if path is None:
            files: list[tuple[Path, str]] = []
            for root, prefix in roots:
                if root.is_dir():
                    files.extend(self._walk(root, root, prefix))
            return files, ""
        target = path.resolve()
        for root, prefix in reversed(roots):  # uploads may live inside the campaign folder
            r = root.resolve()
            if target == r or target.is_relative_to(r):
                rel = "" if target == r else target.relative_to(r).as_posix()
                scope_rel = (prefix + rel).rstrip("/")
                return list(self._walk(root, path, prefix)), scope_rel
        raise ValueError("path outside the campaign folder")

    def _prepare(self, doc: Document, stored_tokens: dict[str, str]) -> _Prepared:
        opts = self.options
        passages = chunk_document(
            doc.doc_id, doc.text, visibility=doc.visibility, params=opts.chunking, pages=doc.pages
        )
        synopsis = doc.synopsis or extractive_synopsis(doc.title, doc.text)
        doc = Document(
            doc_id=doc.doc_id,
            path=doc.path,
            title=doc.title,
            text=doc.text,
            visibility=doc.visibility,
            type=doc.type,
            aliases=doc.aliases,
            tags=doc.tags,
            content_hash=doc.content_hash,
            synopsis=synopsis,
        )
        records: list[tuple[str, str, str, str, str]] = []
        tokens: dict[str, str] = {}
        for p in passages:
            text = (
                contextual_text(doc.title, p.heading, synopsis, p.text)
                if opts.contextual
                else p.text
            )
            h = content_hash(text)
            records.append(
                (vector_id("passage", p.passage_id, h), "passage", p.passage_id, text, h)
            )
            tokens[p.passage_id] = stored_tokens.get(p.passage_id) or " ".join(
                self.tokenizer(p.text)
            )
            if opts.windows:
                for w in make_windows(p, doc.text, window_chars=opts.chunking.window_chars):
                    wh = content_hash(w.text)
                    records.append(
                        (vector_id("window", w.window_id, wh), "window", p.passage_id, w.text, wh)
                    )
        if passages:
            tt = title_text(doc.title, doc.aliases, synopsis)
            th = content_hash(tt)
            records.append(
                (vector_id("title", doc.doc_id, th), "title", passages[0].passage_id, tt, th)
            )
        return _Prepared(doc=doc, passages=passages, records=records, tokens=tokens)

    async def _embed(self, texts_by_hash: dict[str, str]) -> tuple[dict[str, np.ndarray], set[str]]:
        model = self.embedder.model_id
        cached = await self.db.embeddings.get(model, list(texts_by_hash))
        missing = [h for h in texts_by_hash if h not in cached]
        if missing:
            vecs = await self.embedder.embed_passages([texts_by_hash[h] for h in missing])
            fresh = list(zip(missing, vecs, strict=True))
            await self.db.embeddings.put(model, fresh)
            cached.update(fresh)
        return cached, set(missing)

    async def vector_rows(self, doc: Document, tokens: dict[str, str]) -> list[VectorRecord]:
        """Every vector row of a stored document under this indexer's profile (embedded, or
        from the embedding cache): what a re-index writes into the next generation."""
        prep = (await run_cpu(self._prepare_files, [[doc]], tokens))[0]
        if isinstance(prep, str):
            raise ValueError(prep)
        records = prep[0].records
        vectors, _fresh = await self._embed({h: text for (_, _, _, text, h) in records})
        return [
            VectorRecord(
                id=vid,
                passage_id=pid,
                doc_id=prep[0].doc.doc_id,
                kind=kind,
                visibility=prep[0].doc.visibility,
                vector=vectors[h],
            )
            for vid, kind, pid, _text, h in records
        ]

    async def ingest(
        self,
        config: CampaignConfig,
        path: Path | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> IngestReport:
        """Ingest ``path`` (default: the whole campaign folder) into ``config.slug``.
        ``progress(done, total)``: files embedded so far, once the files to embed are known and
        after each batch (counted by file: a file's views are one document to its GM).

        One file's failure (unreadable, unparsable, refused by the vector store) skips that file
        with its reason in the report and lets the rest index; only a failure of the store or
        the embedder as a whole stops the run (:meth:`_write`). Documents whose vectors the store
        lacks are re-prepared as if edited: their vectors come back from the embedding cache.

        A chain of named phases over one :class:`_Run` (the write order of the module
        docstring): :meth:`_open` → :meth:`_plan` → :meth:`_index` → :meth:`_sweep` →
        :meth:`_commit`."""
        t0 = time.perf_counter()
        run = await self._open(config, path)
        await self._plan(run)
        await self._index(run, progress)
        await self._sweep(run)
        await self._commit(run)
        run.report.seconds = time.perf_counter() - t0
        return run.report

    async def _open(self, config: CampaignConfig, path: Path | None) -> _Run:
        """The campaign's collection opened under the current profile, and what SQLite holds of
        it: every later phase diffs against this one reading, not a moving target."""
        slug = config.slug
        await self.db.campaigns.upsert(slug, str(config.root))
        # Reading ``dim`` may load the embedder's weights (seconds of torch): off the event loop.
        dim = await asyncio.to_thread(lambda: self.embedder.dim)
        await self.store.ensure(slug, dim=dim, model_id=self.embedder.model_id)
        await self._reset_if_model_changed(slug)
        stored = await self.db.documents.hashes(slug)
        stored_visibility = await self.db.documents.visibilities(slug)
        stored_by_doc = await self.db.documents.passages_by_doc(slug)
        existing_vectors, unbacked = await self._verify_store(slug, stored_by_doc)
        return _Run(
            config=config,
            path=path,
            dim=dim,
            stored=stored,
            stored_visibility=stored_visibility,
            stored_by_doc=stored_by_doc,
            existing_vectors=existing_vectors,
            unbacked=unbacked,
        )

    async def _verify_store(
        self, slug: str, stored_by_doc: dict[str, list[str]]
    ) -> tuple[set[str] | None, set[str]]:
        """The store's ids when they had to be read, and the documents lacking their vectors.

        The store is derived data: rows it lost (emptied, damaged and recreated, a new
        collection) are refilled, document by document, without the campaign going offline.
        When the store holds exactly the rows SQLite expects, no id is read (a tick over a
        large unchanged campaign); otherwise every id is, and the documents lacking theirs are
        re-prepared. So is every id the first time this process ingests the campaign, and
        whenever the collection it is served from changed (a publish or a rollback, perhaps by
        another process): a collection frozen at an earlier publish can hold as many rows as
        SQLite expects and still lack an edited passage's."""
        row = await self.db.campaigns.get(slug)
        serving = f"{row.store_key}|{row.model_id}" if row is not None else ""
        existing_vectors: set[str] | None = None
        if self._verified.get(slug) != serving or not await self._count_matches(slug):
            existing_vectors = await self.store.ids(slug)
            self._verified[slug] = serving
        unbacked = (
            await run_cpu(unbacked_documents, stored_by_doc, existing_vectors)
            if existing_vectors is not None
            else set()
        )
        if unbacked:
            _log.warning(
                "%s: %d document(s) lack vectors in the store; refilling them from the embedding "
                "cache",
                slug,
                len(unbacked),
            )
        return existing_vectors, unbacked

    async def _plan(self, run: _Run) -> None:
        """Decide, file by file, what this run reads, reuses, keeps or skips; fills
        ``run.todo`` with the views to (re-)index. Nothing is written yet."""
        path, config = run.path, run.config
        if path is not None and not path.exists():  # noqa: ASYNC240 (one stat; the walk runs in a worker)
            run.report.skipped.append(SkippedFile(path.name, "path does not exist"))
        else:
            try:
                run.files, run.scope_rel = await run_cpu(self._scope, config, path)
            except (OSError, ValueError) as exc:
                run.report.skipped.append(
                    SkippedFile(path.name if path else config.slug, f"unreadable path ({exc})")
                )
        for stored_id in run.stored:
            run.views_of.setdefault(source_of(stored_id), []).append(stored_id)
        run.signatures = await run_cpu(_signatures, run.files, self.options.racy_s)
        run.reader = await run_cpu(_reader_key, config)
        was_seen = self._seen.get(run.slug)
        if was_seen is None:
            was_seen = self._seen[run.slug] = await self.db.files.all(run.slug)
        run.was_seen = was_seen
        run.now_seen = {} if path is None else dict(was_seen)
        for n, (fpath, rel) in enumerate(run.files):
            if n % _YIELD_EVERY == _YIELD_EVERY - 1:
                await asyncio.sleep(0)
            await self._plan_file(run, fpath, rel)

    async def _plan_file(self, run: _Run, fpath: Path, rel: str) -> None:
        """One file's plan: refused by type or by a clashing name, reused as last read, or read
        now."""
        doc_id = doc_id_for(rel)
        if fpath.suffix.lower() not in SUPPORTED_SUFFIXES:
            run.report.skipped.append(
                SkippedFile(rel, f"unsupported file type '{fpath.suffix or 'none'}'")
            )
            return
        if doc_id in run.first_of:
            # a.md and a.txt (or an upload and a campaign file under uploads/) are one document
            # id: ingesting both made them replace each other on every run.
            run.report.skipped.append(
                SkippedFile(rel, f"same name as {run.first_of[doc_id]} (rename one of them)")
            )
            return
        run.first_of[doc_id] = rel
        run.seen.add(doc_id)  # a file that fails to load keeps its previous version
        known = run.was_seen.get(rel)
        if known is not None and self._still_as_read(run, rel, doc_id, known):
            self._reuse(run, rel, doc_id, known)
            return
        run.now_seen.pop(rel, None)
        await self._read(run, fpath, rel, doc_id)

    @staticmethod
    def _still_as_read(run: _Run, rel: str, doc_id: str, known: FileRow) -> bool:
        """Whether the file is as this process last read it, and indexed as read (the file
        rows' comment above): same signature and reader, its views stored at those hashes with
        their vectors, and no other view of it stored."""
        return (
            run.signatures.get(rel) == known.signature
            and known.reader == run.reader
            and all(
                run.stored.get(view, ("", ""))[1] == h and view not in run.unbacked
                for view, h in known.views
            )
            and set(run.views_of.get(doc_id, ())) == {view for view, _ in known.views}
        )

    @staticmethod
    def _reuse(run: _Run, rel: str, doc_id: str, known: FileRow) -> None:
        """Count an unchanged file from its row: nothing to read or parse."""
        report = run.report
        run.now_seen[rel] = known
        run.loaded.add(doc_id)
        run.loaded_paths.add(rel)
        report.documents += 1
        report.hidden_sections += known.report.hidden_sections
        report.passages_unchanged += sum(
            len(run.stored_by_doc.get(view, ())) for view, _ in known.views
        )
        run.seen.update(view for view, _ in known.views)
        whole_id = known.views[0][0]
        run.file_reports[whole_id] = replace(
            known.report, unchanged=len(run.stored_by_doc.get(whole_id, ()))
        )

    async def _read(self, run: _Run, fpath: Path, rel: str, doc_id: str) -> None:
        """Read and parse one file (off the event loop); a failure keeps its previous version."""
        try:
            # Reading, decoding and parsing a file of up to max_bytes: off the event loop.
            parsed = await run_cpu(
                load_file, fpath, rel, run.config, max_bytes=self.options.max_bytes
            )
        except Exception as exc:
            if isinstance(exc, LoadError):
                reason = exc.reason
            else:  # a parser's own failure: that file's, never the campaign's
                _log.warning("%s: %s could not be parsed", run.slug, rel, exc_info=True)
                reason = f"could not be parsed ({type(exc).__name__})"
            await self._keep_previous(run, rel, doc_id, reason)
            return
        self._take_parsed(run, rel, doc_id, parsed)

    async def _keep_previous(self, run: _Run, rel: str, doc_id: str, reason: str) -> None:
        """A file that failed to load: its stored views stay, and the GM is told nothing was
        lost (the last good version stays searchable)."""
        kept_views = run.views_of.get(doc_id, [])
        run.seen.update(kept_views)
        kept_note = f"; {KEPT_NOTE}" if kept_views else ""
        run.report.skipped.append(SkippedFile(rel, reason + kept_note))
        kept_docs: list[Document] = []
        for view in kept_views:
            if not run.stored[view][1] or view in run.unbacked:
                # Awaiting a rebuild (new embedder or tokenizer), or its vectors lost:
                # rebuild the kept version from its stored text, or it would have no
                # vectors (nor BM25 tokens) under the current profile.
                kept = await self.db.documents.get(run.slug, view)
                if kept is not None:
                    kept_docs.append(replace(kept, content_hash=run.stored[view][1] or _KEPT))
        if kept_docs:
            run.todo.append(kept_docs)

    @staticmethod
    def _take_parsed(run: _Run, rel: str, doc_id: str, parsed: ParsedFile) -> None:
        """A file read now: its report, its row for the next run, and its changed views."""
        report, stored = run.report, run.stored
        run.loaded.add(doc_id)
        run.loaded_paths.add(rel)
        report.documents += 1
        report.hidden_sections += parsed.hidden_sections
        whole = parsed.views[0]
        run.file_reports[whole.doc_id] = FileReport(
            path=rel,
            doc_id=doc_id,
            visibility=parsed.visibility,
            type=parsed.type,
            hidden_sections=parsed.hidden_sections,
            warnings=parsed.warnings,
            held_back=parsed.held_back,
        )
        if whole.doc_id in stored and stored[whole.doc_id][1] == whole.content_hash:
            run.file_reports[whole.doc_id].unchanged = len(run.stored_by_doc.get(whole.doc_id, []))
        signature = run.signatures.get(rel)
        if signature is not None:
            # Checked at its next use against what SQLite then holds: a view that failed to
            # index here, or that another process rewrote, sends the file back to be read.
            run.now_seen[rel] = FileRow(
                path=rel,
                signature=signature,
                reader=run.reader,
                views=tuple((d.doc_id, d.content_hash) for d in parsed.views),
                report=replace(run.file_reports[whole.doc_id]),
            )
        changed: list[Document] = []
        for doc in parsed.views:
            run.seen.add(doc.doc_id)
            if (
                doc.doc_id in stored
                and stored[doc.doc_id][1] == doc.content_hash
                and doc.doc_id not in run.unbacked
            ):
                report.passages_unchanged += len(run.stored_by_doc.get(doc.doc_id, []))
                continue
            changed.append(doc)
        if changed:
            run.todo.append(changed)

    async def _skip(self, run: _Run, views: Sequence[Document], reason: str) -> None:
        """One file that could not be indexed: its previous version stays (or, awaiting a
        rebuild, goes: it cannot be brought to the current profile, and would hold the
        whole campaign "being rebuilt"), and the report says why."""
        report = run.report
        file_id, rel = source_of(views[0].doc_id), views[0].path
        previous = run.views_of.get(file_id, [])
        run.seen.update(previous)
        run.loaded.discard(file_id)
        run.loaded_paths.discard(rel)
        kept = False
        for view in previous:
            if run.stored[view][1]:
                kept = True
            else:
                report.passages_removed += await self.db.documents.remove(run.slug, view)
        for key in [k for k, fr in run.file_reports.items() if fr.path == rel]:
            del run.file_reports[key]  # keyed by the file's first view (``X//gm`` if it hides)
            report.documents -= 1
        # A kept version that failed again keeps the reason its file failed to load.
        said = [s.reason for s in report.skipped if s.path == rel]
        if said:
            reason = said[0].removesuffix(f"; {KEPT_NOTE}")
            report.skipped[:] = [s for s in report.skipped if s.path != rel]
        report.skipped.append(SkippedFile(rel, reason + (f"; {KEPT_NOTE}" if kept else "")))
        _log.warning("%s: %s not indexed: %s", run.slug, rel, reason)

    async def _index(self, run: _Run, progress: Callable[[int, int], None] | None) -> None:
        """Embed, write and commit ``run.todo`` batch by batch, reporting progress by file."""
        todo = run.todo
        files_done = 0
        if progress is not None:
            progress(0, len(todo))
        await self._load_held(run)
        for group in _batches(todo, self.options.batch_docs):
            await self._index_batch(run, group)
            files_done += len(group)
            if progress is not None:
                progress(files_done, len(todo))
        run.report.files = list(run.file_reports.values())

    async def _load_held(self, run: _Run) -> None:
        """The store's ids by document and the stored BM25 tokens, read only when something
        is to be indexed (an unchanged tick reads neither)."""
        run.held = run.existing_vectors if run.existing_vectors is not None else set()
        if not run.todo:
            return
        if run.existing_vectors is None:
            run.held = await self.store.ids(run.slug)
            if await run_cpu(unbacked_documents, run.stored_by_doc, run.held):
                # The count matched, the ids do not: the next ingest checks every document.
                self._verified.pop(run.slug, None)
        run.held_by_doc = await run_cpu(_by_doc, run.held)
        run.stored_tokens = await self.db.documents.tokens(
            run.slug, (d.doc_id for views in run.todo for d in views)
        )

    async def _index_batch(self, run: _Run, group: list[list[Document]]) -> None:
        """One batch in the module docstring's order: prepare, embed, upsert and flush, then
        commit each document in SQLite, then drop the vectors the batch superseded."""
        # Chunking, synopses and tokenizing a batch: CPU work, off the event loop.
        prepared = await run_cpu(self._prepare_files, group, run.stored_tokens)
        ready: list[list[_Prepared]] = []
        for views, outcome in zip(group, prepared, strict=True):
            if isinstance(outcome, str):
                await self._skip(run, views, outcome)
            else:
                ready.append(outcome)
        texts = {h: text for f in ready for prep in f for (_, _, _, text, h) in prep.records}
        vectors, fresh = await self._embed(texts)
        moved = _moved(ready, run.stored_visibility)
        rows = [_rows(f, vectors, run.held, moved) for f in ready]
        written = await self._write(run.slug, rows, dim=run.dim)
        await self.store.flush(run.slug)
        batch: list[_Prepared] = []
        for f, file_rows, refused in zip(ready, rows, written, strict=True):
            if refused:
                await self._skip(run, [p.doc for p in f], refused)
                continue
            batch.extend(f)
            run.held.update(r.id for r in file_rows)
            for r in file_rows:
                run.held_by_doc.setdefault(r.doc_id, set()).add(r.id)
        for prep in batch:
            _count_passages(run, prep, fresh)
            await self._commit_document(run, prep, moved)
        await self._drop_superseded(run, batch)

    async def _commit_document(
        self, run: _Run, prep: _Prepared, moved: dict[str, frozenset[str]]
    ) -> None:
        """Step 3 of the module docstring for one document: its passage set replaced in one
        SQLite transaction, and the memories of lenses that lost sight of text forget it."""
        slug = run.slug
        newly_hidden = await self._newly_hidden(slug, prep.doc, run.config, run.stored_visibility)
        await self.db.documents.replace(slug, prep.doc, prep.passages, prep.tokens)
        if prep.doc.doc_id in moved:
            await forget_hidden(self.db, slug, moved[prep.doc.doc_id], prep.doc.visibility)
        if newly_hidden:
            # A section was hidden just now: the readers of the file's shared view forget
            # what they may have read of it before.
            await forget_hidden(self.db, slug, newly_hidden, frozenset())

    async def _drop_superseded(self, run: _Run, batch: list[_Prepared]) -> None:
        """Same passage, new context (e.g. a retitled document): drop the old vectors now. By
        each vector's own document id, not a prefix ("npc" is a prefix of "npc#2")."""
        current = {prep.doc.doc_id: {vid for vid, *_ in prep.records} for prep in batch}
        superseded = [
            v
            for owner, keep in current.items()
            for v in run.held_by_doc.get(owner, ())
            if v not in keep
        ]
        if superseded:
            await self.store.delete(run.slug, superseded)
            run.held.difference_update(superseded)
            for owner in current:
                run.held_by_doc.get(owner, set()).difference_update(superseded)

    async def _sweep(self, run: _Run) -> None:
        """Step 4 of the module docstring: remove what vanished, then collect the vectors no
        current passage names."""
        await self._remove_vanished(run)
        if run.todo or run.existing_vectors is not None or run.report.passages_removed:
            # Nothing read, written or removed, and the store's count as SQLite expects: no
            # vector can have been orphaned since the last collection. The ids this run read
            # (and kept up to date with its writes and deletes) are not read a second time.
            read = run.todo or run.existing_vectors is not None
            await self.collect_garbage(run.slug, held=run.held if read else None)

    async def _remove_vanished(self, run: _Run) -> None:
        """Deletions: only documents inside the ingested scope that vanished from disk, and
        views a file read this run no longer has (its hidden sections went, or it became
        GM-only)."""
        report, scope_rel = run.report, run.scope_rel
        for doc_id, (rel, _h) in run.stored.items():
            in_scope = (
                not scope_rel or rel == scope_rel or rel.startswith(scope_rel.rstrip("/") + "/")
            )
            if (
                in_scope
                and doc_id not in run.seen
                and (
                    source_of(doc_id) in run.loaded
                    or rel in run.loaded_paths
                    or not run.config.path_of(rel).exists()
                )
            ):
                report.passages_removed += await self.db.documents.remove(run.slug, doc_id)
                report.documents_removed += doc_id == source_of(doc_id)
                # Moving a file into a GM folder (the usual way to hide it) removes its old id:
                # forget what the lenses that could read it remember, as for a narrowed one.
                if (was := run.stored_visibility.get(doc_id)) is not None:
                    await forget_hidden(self.db, run.slug, was, frozenset({GM}))

    async def _commit(self, run: _Run) -> None:
        """The file rows for the next run, and the profile once the campaign is built under it.

        The profile is recorded only once no document is left awaiting re-preparing (a reset
        blanks every content hash). Until then the engine tells players the index is being
        rebuilt (from any process), and the next ingest goes on; a one-file ingest after a
        reset, or after an interrupted rebuild, leaves it so."""
        slug, was_seen, now_seen = run.slug, run.was_seen, run.now_seen
        self._seen[slug] = now_seen
        await self.db.files.update(
            slug,
            [f for rel, f in now_seen.items() if was_seen.get(rel) is not f],
            [rel for rel in was_seen if rel not in now_seen],
        )
        if not await self.db.documents.awaiting_rebuild(slug):
            await self.db.campaigns.set_model(slug, self.profile())

    def _prepare_files(
        self, files: list[list[Document]], stored_tokens: dict[str, str]
    ) -> list[list[_Prepared] | str]:
        """Each file's views prepared, or why that file could not be (a text the chunker or the
        tokenizer cannot take fails its file, not the batch)."""
        out: list[list[_Prepared] | str] = []
        for views in files:
            try:
                out.append([self._prepare(d, stored_tokens) for d in views])
            except Exception as exc:
                _log.warning("%s could not be split into passages", views[0].path, exc_info=True)
                out.append(f"could not be split into passages ({type(exc).__name__})")
        return out

    async def _write(self, slug: str, files: list[list[VectorRecord]], *, dim: int) -> list[str]:
        """Upsert each file's rows; returns, per file, why the store refused them ("" if it took
        them). One upsert for the batch; when it fails, one per file, so a file whose rows the
        store refuses (an id or a value over a limit) is told apart from the rest. When no file's
        rows go in, a probe row says whether the store takes any row at all: if not, the store
        itself is failing and the error is raised (nothing is skipped, nothing removed)."""
        try:
            await self.store.upsert(slug, [r for rows in files for r in rows])
            return [""] * len(files)
        except StoreError as exc:
            first = exc
        refused: list[str] = []
        took = False  # a file with rows had them taken: the store works
        for rows in files:
            try:
                await self.store.upsert(slug, rows)
                refused.append("")
                took = took or bool(rows)
            except StoreError as exc:
                _log.warning("%s: the vector store refused a file's rows: %s", slug, exc)
                refused.append("the vector store refused its rows")
        if not took and not await self._store_takes_rows(slug, dim):
            raise first
        return refused

    async def _store_takes_rows(self, slug: str, dim: int) -> bool:
        """Whether the store takes a plain row now (written, then deleted; a leftover is never
        searched, as no passage names it, and the next garbage collection drops it)."""
        vector = np.zeros(dim, dtype=np.float32)
        vector[0] = 1.0
        probe = VectorRecord(
            id=_PROBE_ID,
            passage_id="",
            doc_id="",
            kind="probe",
            visibility=frozenset({GM}),
            vector=vector,
        )
        try:
            await self.store.upsert(slug, [probe])
            await self.store.delete(slug, [_PROBE_ID])
        except StoreError:
            return False
        return True

    async def _newly_hidden(
        self,
        slug: str,
        doc: Document,
        config: CampaignConfig,
        stored_visibility: dict[str, frozenset[str]],
    ) -> frozenset[str]:
        """The visibility of a file's shared view when ``doc``, the GM's whole text of the file,
        hides text its stored version did not (a section hidden just now), else empty. A file
        stored before without hidden sections had none hidden; a rebuild of the same text hides
        nothing new."""
        source = source_of(doc.doc_id)
        if (
            doc.doc_id == source
            or not doc.doc_id.endswith("//gm")
            or source not in stored_visibility
        ):
            return frozenset()
        old = await self.db.documents.get(slug, doc.doc_id)
        was = (
            {
                old.text[h.start : h.end]
                for h in find_hidden_sections(_gated(old), lenses=config.lenses)
            }
            if old
            else set()
        )
        now = {
            doc.text[h.start : h.end]
            for h in find_hidden_sections(_gated(doc), lenses=config.lenses)
        }
        return stored_visibility[source] if now - was else frozenset()

    async def embedded_hashes(self, slug: str) -> set[str]:
        """The content hashes of every text the campaign's stored documents embed under the
        current options (passages, windows, titles): the embedding-cache rows an export carries
        so that an import re-embeds nothing."""
        docs = await self.db.documents.all(slug)
        tokens = {r.passage_id: r.tokens for r in await self.db.documents.passages(slug)}
        prepared = await run_cpu(self._prepare_files, [[d] for d in docs], tokens)
        return {
            h for f in prepared if not isinstance(f, str) for prep in f for *_, h in prep.records
        }

    async def unbacked(self, slug: str) -> set[str]:
        """Documents of ``slug`` whose vectors the store lacks (:func:`unbacked_documents`): what
        the next ingest refills. Opens the campaign's collection, which repairs a damaged one."""
        dim = await asyncio.to_thread(lambda: self.embedder.dim)
        await self.store.ensure(slug, dim=dim, model_id=self.embedder.model_id)
        by_doc: dict[str, list[str]] = {}
        for pid in await self.db.documents.passage_ids(slug):
            by_doc.setdefault(pid.rsplit("#", 1)[0], []).append(pid)
        return unbacked_documents(by_doc, await self.store.ids(slug))

    def profile(self) -> str:
        """What the campaign's index was built with: embedder, embedding options, tokenizer."""
        return (
            f"{self.embedder.model_id}|ctx={int(self.options.contextual)}|win={int(self.options.windows)}"
            f"|{self.tokenizer.tag}"
        )

    async def _reset_if_model_changed(self, slug: str, *, force: bool = False) -> None:
        """Mark every document for re-preparing when the profile changed (or ``force``). The
        campaign's recorded profile is cleared until no document awaits re-preparing. (A store
        that lost rows is no reason: those documents are refilled one by one, and the campaign
        keeps answering meanwhile.)"""
        row = await self.db.campaigns.get(slug)
        # The index profile: the embedder and the options that decide what gets embedded. Any
        # change re-prepares every document (vectors come from the cache where the text is the
        # same), and the garbage collection below then drops what the new profile no longer has.
        model = self.profile()
        if force or (row is not None and row.model_id and row.model_id != model):
            # A new embedder or a new (empty) collection: every document is re-prepared; vectors
            # come from the embedding cache where the text is unchanged.
            _log.info("full re-index of %s (profile %s, new collection: %s)", slug, model, force)
            # Forget content hashes so every document is re-prepared into the new collection;
            # stored BM25 tokens may come from another tokenizer: re-tokenize (cheap; no model).
            await self.db.documents.mark_for_rebuild(slug)
            await self.db.campaigns.set_model(slug, "")

    async def _count_matches(self, slug: str) -> bool:
        """Whether the store holds exactly one vector per stored passage plus one title vector
        per document with passages. Sentence windows are not counted (with windows on: never).

        A count is not a check of every id: lost rows and as many orphans at once would pass. The
        start's check (``Engine.ensure_indexed``) and every ingest that changes anything read
        every id; between them, losing rows without gaining any is what damage looks like."""
        if self.options.windows:
            return False
        passages, titled = await self.db.documents.vector_owners(slug)
        return await self.store.count(slug) == passages + titled

    async def collect_garbage(self, slug: str, *, held: set[str] | None = None) -> int:
        """Delete vectors that no current passage or title refers to (left by edits or a killed run),
        and sentence windows when the options no longer embed them. ``held``: the store's ids,
        when the caller has just read them (otherwise they are read here)."""
        live = await self.db.documents.passage_ids(slug)
        titles = await self.db.documents.title_texts(slug)
        if held is None:
            held = await self.store.ids(slug)
        windows = self.options.windows

        def stale_ids() -> list[str]:
            alive = live | {
                vector_id("title", doc_id, content_hash(title_text(title, aliases, synopsis)))
                for doc_id, title, aliases, synopsis in titles
            }
            return [
                i
                for i in held
                if vector_owner(i) not in alive or (not windows and i[:2].lower() == "w:")
            ]

        stale = await run_cpu(stale_ids)
        if stale:
            await self.store.delete(slug, stale)
            await self.store.flush(slug)
        return len(stale)
