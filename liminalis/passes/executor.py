"""The one executor: it walks a pass definition over every pending document of a campaign.

It alone owns what makes a run safe to leave running unattended:

* **Pending.** A source document (a file; its views are rows ``doc``, ``doc//gm``,
  ``doc//lens:NAME``) is pending for pass P when the hash of its views,
  ``H(d) = sha256(⟨view_id:content_hash⟩ sorted)``, differs from the hash P's state recorded for
  it. A document mid-rebuild (a blank content hash) waits; a state left by a removed document
  is dropped with its facts.
* **Caps.** Node executions, model calls and tokens (input + output, the call's estimate
  reserved before it is made, so the cap is never passed) are counted per run; the first to run
  out stops the run: ``status = "capped"``, ``reason`` names the cap, and the documents not
  finished stay pending.
* **Credit.** Before each new document the :class:`~liminalis.passes.ports.CreditGate` is
  asked; a refusal stops new documents (``status = "credit"``), lets those in flight finish,
  and leaves the rest pending for the next run. Each model call is charged to it.
* **Pause.** A paused campaign's autonomous runs (``changed``, ``scheduled``) do not start, and
  one running stops taking documents; requested runs go on. Nothing is lost: a pause changes no
  state, so every document changed meanwhile is still pending after ``resume``.
* **Concurrency.** ``min(definition.concurrency, max_concurrency)`` documents at a time; one
  run per (campaign, pass) at a time.
* **Writes.** Finished documents are written in batches (:meth:`PassRepository.record`): facts
  replaced and state marked in one transaction, with every node's trace row.

A node that raises marks its document ``failed`` (with the hash it failed at: it is tried again
when it changes or the definition does) and the run goes on; a model that is unavailable stops
the run (``status = "failed"``) with the documents pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from liminalis.errors import ModelUnavailable, SpendRefused
from liminalis.ingest.sections import source_of
from liminalis.passes.definition import AUTONOMOUS, PassDefinition, validate
from liminalis.passes.nodes import builtin_registry
from liminalis.passes.ports import CreditGate, PassModel
from liminalis.passes.registry import (
    DocView,
    NodeContext,
    NodeRegistry,
    SourceDocument,
)
from liminalis.ports import Clock, Usage
from liminalis.progress import ProgressBoard, ProgressWatcher
from liminalis.store.passes import DocumentResult, Fact, TraceRow
from liminalis.store.sqlite import Database

__all__ = ["Executor", "RunResult", "view_hash"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended. ``run_id`` is ``None`` for a run that did not start (``paused``, or
    ``idle``: an autonomous trigger with nothing pending is not recorded)."""

    campaign: str
    pass_id: str
    trigger: str
    status: str  # "done" | "capped" | "credit" | "paused" | "failed" | "cancelled" | "idle"
    reason: str = ""
    run_id: int | None = None
    documents_done: int = 0
    documents_failed: int = 0
    documents_left: int = 0
    node_executions: int = 0
    model_calls: int = 0
    tokens: int = 0
    facts: int = 0


def view_hash(views: Sequence[tuple[str, str]]) -> str:
    """``H(d)``: the hash of a source document's ``(view_id, content_hash)`` pairs."""
    joined = "\n".join(f"{v}:{h}" for v, h in sorted(views))
    return hashlib.sha256(joined.encode()).hexdigest()[:32]


#: A pending document: its id, ``H(d)``, and its view ids.
_Pending = tuple[str, str, tuple[str, ...]]


class _Stopped(Exception):
    """Raised inside a document's walk once the run is halted (a cap, a model gone)."""


@dataclass
class _Run:
    campaign: str
    definition: PassDefinition
    trigger: str
    run_id: int
    node_executions: int = 0
    model_calls: int = 0
    tokens: int = 0
    seq: int = 0
    #: Set by a cap or a model gone: documents in flight are abandoned too.
    halted: bool = False
    #: Set by the credit gate or a pause: documents in flight finish, no new one starts.
    status: str = ""
    reason: str = ""
    #: Documents done and failed so far, drawn by the executor's progress watchers.
    board: ProgressBoard | None = None
    total: int = 0
    done: int = 0
    failed: int = 0
    abandoned: int = 0
    in_flight: int = 0
    facts: int = 0
    results: list[DocumentResult] = field(default_factory=list)
    traces: list[TraceRow] = field(default_factory=list)

    def stop(self, status: str, reason: str, *, halt: bool) -> None:
        if not self.status:
            self.status, self.reason = status, reason
            _log.info(
                "pass %s on %s stops: %s", self.definition.name, self.campaign, reason or status
            )
        self.halted = self.halted or halt


def _size(value: object) -> int:
    return len(value) if isinstance(value, (Sequence, Mapping)) else int(value is not None)


class Executor:
    """Runs pass definitions over a campaign's pending documents.

    Args:
        db: the store (documents, and ``db.passes``).
        model: the model port the ``prompt-model`` nodes call.
        gate: asked before each new document, charged after each model call.
        clock: times the trace rows and the run.
        registry: the node types (default: :func:`~liminalis.passes.nodes.builtin_registry`).
        batch_size: finished documents written per transaction.
        max_concurrency: the most documents in flight, whatever a definition asks.
    """

    def __init__(
        self,
        db: Database,
        *,
        model: PassModel,
        gate: CreditGate,
        clock: Clock,
        registry: NodeRegistry | None = None,
        batch_size: int = 8,
        max_concurrency: int = 4,
    ) -> None:
        self.db = db
        self.model = model
        self.gate = gate
        self.clock = clock
        self.registry = registry or builtin_registry()
        self.batch_size = max(1, batch_size)
        self.max_concurrency = max(1, max_concurrency)
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        #: Told how far each run has come (the CLI's ``pass run`` draws it on a terminal).
        self.watchers: list[ProgressWatcher] = []

    def _now(self) -> float:
        return self.clock.now().timestamp()

    # -- pending -----------------------------------------------------------------------------

    async def pending(self, campaign: str, pass_id: str) -> tuple[list[_Pending], list[str]]:
        """``([(doc_id, H(d), view ids)], orphans)``: the documents pending for the pass, in id
        order, and the documents its state remembers that no longer exist."""
        groups: dict[str, list[tuple[str, str]]] = {}
        for view_id, (_, content_hash) in (await self.db.documents.hashes(campaign)).items():
            groups.setdefault(source_of(view_id), []).append((view_id, content_hash))
        states = await self.db.passes.states(campaign, pass_id)
        pending: list[_Pending] = []
        for doc_id in sorted(groups):
            views = groups[doc_id]
            if any(not h for _, h in views):
                continue  # mid-rebuild: its next ingest gives it a hash
            h = view_hash(views)
            state = states.get(doc_id)
            if state is None or state.content_hash != h:
                pending.append((doc_id, h, tuple(sorted(v for v, _ in views))))
        return pending, sorted(d for d in states if d not in groups)

    async def _document(self, campaign: str, pending: _Pending) -> SourceDocument:
        doc_id, content_hash, view_ids = pending
        views: list[DocView] = []
        for view_id in view_ids:
            doc = await self.db.documents.get(campaign, view_id)
            if doc is not None:
                views.append(
                    DocView(
                        view_id=doc.doc_id,
                        doc_id=doc_id,
                        path=doc.path,
                        title=doc.title,
                        type=doc.type,
                        text=doc.text,
                        visibility=doc.visibility,
                    )
                )
        return SourceDocument(doc_id=doc_id, content_hash=content_hash, views=tuple(views))

    # -- a run -------------------------------------------------------------------------------

    async def run(self, campaign: str, definition: PassDefinition, *, trigger: str) -> RunResult:
        """Run ``definition`` over ``campaign``'s pending documents (see the module docstring).

        Raises:
            InvalidInput: the definition no longer validates (a node type gone).
        """
        order = validate(definition, self.registry)
        name = definition.name
        if trigger in AUTONOMOUS and await self.db.credits.paused(campaign):
            return RunResult(campaign, name, trigger, "paused", "the campaign's passes are paused")
        async with self._locks.setdefault((campaign, name), asyncio.Lock()):
            pending, orphans = await self.pending(campaign, name)
            await self.db.passes.forget_documents(campaign, name, orphans)
            if not pending and trigger in AUTONOMOUS:
                return RunResult(campaign, name, trigger, "idle", "nothing pending")
            run_id = await self.db.passes.start_run(campaign, name, trigger=trigger, at=self._now())
            run = _Run(campaign=campaign, definition=definition, trigger=trigger, run_id=run_id)
            board = run.board = self._board(name)
            run.total = len(pending)
            board.start(campaign)
            board.update(campaign, 0, run.total)
            queue = deque(pending)
            try:
                await self._drive(run, order, queue)
            except BaseException as exc:
                # Recorded before the error goes on: a run row never stays "running" for a run
                # that ended (cancelled at shutdown, or the store failing), and what it had not
                # finished is pending anyway.
                if isinstance(exc, asyncio.CancelledError):
                    run.stop("cancelled", "cancelled (shutdown)", halt=True)
                else:
                    run.stop("failed", f"{type(exc).__name__}: {exc}", halt=True)
                with contextlib.suppress(Exception):
                    await asyncio.shield(
                        self._finish(run, left=len(queue) + run.abandoned + run.in_flight)
                    )
                raise
            finally:
                board.finish(campaign)
            return await self._finish(run, left=len(queue) + run.abandoned + run.in_flight)

    def _board(self, name: str) -> ProgressBoard:
        """A run's own board, stamped by the executor's clock and watched by its watchers."""
        board = ProgressBoard(self.clock, stage=f"pass {name}")
        for watcher in self.watchers:
            board.watch(watcher)
        return board

    async def _drive(self, run: _Run, order: Sequence[str], queue: deque[_Pending]) -> None:
        flushing = asyncio.Lock()

        async def flush() -> None:
            async with flushing:
                results, traces = run.results, run.traces
                run.results, run.traces = [], []
                if results or traces:
                    await self.db.passes.record(
                        run.campaign,
                        run.definition.name,
                        results=results,
                        traces=traces,
                        at=self._now(),
                    )

        async def worker() -> None:
            while queue and not run.status:
                if not await self.gate.allow_background(
                    run.campaign, requested=run.trigger not in AUTONOMOUS
                ):
                    run.stop("credit", "the credit gate refused more background work", halt=False)
                    break
                if run.trigger in AUTONOMOUS and await self.db.credits.paused(run.campaign):
                    run.stop("paused", "the campaign's passes were paused", halt=False)
                    break
                if not queue or run.status:
                    break
                run.in_flight += 1
                document = await self._document(run.campaign, queue.popleft())
                result = await self._walk(run, order, document)
                run.in_flight -= 1
                if result is None:
                    run.abandoned += 1
                else:
                    run.results.append(result)
                    run.done += result.status == "done"
                    run.failed += result.status == "failed"
                    run.facts += len(result.facts)
                    if run.board is not None:
                        run.board.update(run.campaign, run.done + run.failed, run.total)
                if len(run.results) >= self.batch_size:
                    await flush()

        workers = min(run.definition.concurrency, self.max_concurrency, max(1, len(queue)))
        try:
            async with asyncio.TaskGroup() as tg:
                for _ in range(workers):
                    tg.create_task(worker())
        finally:
            await flush()

    async def _finish(self, run: _Run, *, left: int) -> RunResult:
        status = run.status or "done"
        await self.db.passes.finish_run(
            run.run_id,
            status=status,
            reason=run.reason,
            at=self._now(),
            documents_done=run.done,
            documents_failed=run.failed,
            documents_left=left,
            node_executions=run.node_executions,
            model_calls=run.model_calls,
            tokens=run.tokens,
        )
        return RunResult(
            campaign=run.campaign,
            pass_id=run.definition.name,
            trigger=run.trigger,
            status=status,
            reason=run.reason,
            run_id=run.run_id,
            documents_done=run.done,
            documents_failed=run.failed,
            documents_left=left,
            node_executions=run.node_executions,
            model_calls=run.model_calls,
            tokens=run.tokens,
            facts=run.facts,
        )

    # -- one document ------------------------------------------------------------------------

    async def _walk(
        self, run: _Run, order: Sequence[str], document: SourceDocument
    ) -> DocumentResult | None:
        """The definition over one document: its result, or ``None`` when the run halted
        before the document finished (it stays pending). Node by node in ``order``
        (:meth:`_admit`, :meth:`_run_node`); a node's failure fails the document, a stop or an
        unavailable model leaves it pending."""
        outputs: dict[str, Any] = {}
        facts: list[Fact] = []
        for node_id in order:
            if not self._admit(run):
                return None
            ctx, failure = await self._run_node(run, node_id, document, outputs)
            if failure is not None:
                if isinstance(failure, (_Stopped, ModelUnavailable)):
                    return None
                return DocumentResult(
                    doc_id=document.doc_id,
                    content_hash=document.content_hash,
                    status="failed",
                    error=f"node {node_id}: {type(failure).__name__}: {failure}"[:2000],
                )
            facts += ctx.facts
        return DocumentResult(
            doc_id=document.doc_id, content_hash=document.content_hash, status="done", facts=facts
        )

    @staticmethod
    def _admit(run: _Run) -> bool:
        """Whether the run may execute one more node (counted now): not halted, and under its
        ``node_executions`` cap, which halts it when reached."""
        if run.halted:
            return False
        caps = run.definition.caps
        if run.node_executions >= caps.node_executions:
            run.stop("capped", f"node_executions cap ({caps.node_executions}) reached", halt=True)
            return False
        run.node_executions += 1
        return True

    async def _run_node(
        self, run: _Run, node_id: str, document: SourceDocument, outputs: dict[str, Any]
    ) -> tuple[NodeContext, BaseException | None]:
        """Run one node on its inputs (its in-edges' sources' outputs) into ``outputs``, and
        trace it; its context and why it failed, if it did. A node's own error is logged and
        fails only this document; an unavailable model halts the run."""
        definition = run.definition
        spec = definition.node(node_id)
        node_type = self.registry.types[spec.type]
        inputs = {e.input: outputs[e.source] for e in definition.edges if e.target == node_id}
        ctx = NodeContext(
            campaign=run.campaign,
            pass_id=definition.name,
            node_id=node_id,
            params=spec.params,
            document=document,
            complete=self._metered(run, node_id),
            registry=self.registry,
            db=self.db,
        )
        started = self.clock.now()
        failure: BaseException | None = None
        try:
            outputs[node_id] = await node_type.run(ctx, inputs)
        except _Stopped as exc:
            failure = exc
        except ModelUnavailable as exc:
            run.stop("failed", f"model unavailable: {exc}", halt=True)
            failure = exc
        except Exception as exc:
            _log.warning(
                "pass %s node %s failed on %s",
                definition.name,
                node_id,
                document.doc_id,
                exc_info=True,
            )
            failure = exc
        self._trace(run, document, node_id, spec.type, inputs, outputs, ctx, started, failure)
        return ctx, failure

    def _trace(
        self,
        run: _Run,
        document: SourceDocument,
        node_id: str,
        node_type: str,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
        ctx: NodeContext,
        started: datetime,
        failure: BaseException | None,
    ) -> None:
        """One node's trace row: sizes in and out, time, model calls, tokens, and its errors
        (the node's own, then why it stopped or failed)."""
        errors = list(ctx.errors)
        if failure is not None:
            errors.append(
                f"stopped: {run.reason}"
                if isinstance(failure, _Stopped)
                else f"{type(failure).__name__}: {failure}"
            )
        run.seq += 1
        run.traces.append(
            TraceRow(
                run_id=run.run_id,
                seq=run.seq,
                doc_id=document.doc_id,
                node_id=node_id,
                node_type=node_type,
                inputs={k: _size(v) for k, v in inputs.items()},
                output_size=_size(outputs.get(node_id)),
                started_at=started.timestamp(),
                ms=(self.clock.now() - started).total_seconds() * 1000,
                model_calls=ctx.model_calls,
                tokens=ctx.tokens,
                error="; ".join(errors)[:2000],
            )
        )

    def _metered(self, run: _Run, node_id: str) -> Any:
        """The model call a node makes: refused once the run halted or a cap would be passed,
        its estimate reserved against the token cap, charged to the gate once made."""

        async def complete(
            role: str, system: str, prompt: str, max_tokens: int
        ) -> tuple[str, Usage]:
            caps = run.definition.caps
            if run.halted:
                raise _Stopped()
            if run.model_calls >= caps.model_calls:
                run.stop("capped", f"model_calls cap ({caps.model_calls}) reached", halt=True)
                raise _Stopped()
            estimate = (len(system) + len(prompt)) // 4 + max_tokens
            if run.tokens + estimate > caps.tokens:
                run.stop(
                    "capped",
                    f"tokens cap ({caps.tokens}) reached: {run.tokens} spent, a call may take "
                    f"{estimate}",
                    halt=True,
                )
                raise _Stopped()
            run.model_calls += 1
            run.tokens += estimate
            try:
                text, usage = await self.model.complete(
                    role,
                    system,
                    prompt,
                    campaign=run.campaign,
                    pass_id=run.definition.name,
                    node=node_id,
                    max_tokens=max_tokens,
                    requested=run.trigger not in AUTONOMOUS,
                )
            except SpendRefused as exc:
                # The router's gate said no (credits, the day's share, a pause): this document
                # waits, pending; the documents in flight finish; none starts after it.
                run.tokens -= estimate
                run.model_calls -= 1
                run.stop("credit", exc.user_message, halt=False)
                raise _Stopped() from exc
            except BaseException:
                run.tokens -= estimate
                raise
            run.tokens += usage.input_tokens + usage.output_tokens - estimate
            await self.gate.charge(
                run.campaign, pass_id=run.definition.name, node=node_id, role=role, usage=usage
            )
            return text, usage

        return complete
