"""The passes facade: save and read definitions, run them on each trigger, pause, report, facts.

The composition root builds one :class:`Passes` over the database, a
:class:`~liminalis.passes.ports.PassModel` and a :class:`~liminalis.passes.ports.CreditGate`;
the engine calls :meth:`Passes.on_ingested` after every ingest (the scheduler's tick and
uploads alike), the scheduler calls :meth:`Passes.run` for a ``cron``, and ``liminalis pass run``
calls it on request. Background runs are supervised tasks: one per campaign at a time, a trigger
arriving meanwhile runs once more after it, and a failure is logged, never lost silently.

Two hook lists let a subsystem keep its own passes in step without the executor knowing it
(:class:`liminalis.knowledge.passes.KnowledgePasses`): ``before_runs`` (``await hook(campaign)``,
before a trigger reads the definitions: seeding) and ``after_runs`` (``await hook(campaign,
results)``, once they have run: the campaign-level overview).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from liminalis.errors import InvalidInput, NotFound
from liminalis.passes.definition import TRIGGERS, PassDefinition, parse_definition, validate
from liminalis.passes.executor import Executor, RunResult
from liminalis.passes.nodes import builtin_registry
from liminalis.passes.ports import AllowAllGate, CreditGate, NoPassModel, PassModel
from liminalis.passes.registry import NodeRegistry
from liminalis.ports import Clock
from liminalis.progress import ProgressWatcher
from liminalis.store.passes import Fact, RunRow, TraceRow
from liminalis.store.sqlite import Database
from liminalis.types import IngestReport

__all__ = ["AfterRuns", "BeforeRuns", "NodeSummary", "PassReport", "Passes"]

#: ``await hook(campaign)`` before a trigger or a requested run reads the definitions (what it
#: returns is ignored).
BeforeRuns = Callable[[str], Awaitable[object]]
#: ``await hook(campaign, results)`` after the runs a trigger (or a request) started.
AfterRuns = Callable[[str, Sequence[RunResult]], Awaitable[None]]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """One node over a run's trace: executions, items out, errors, model calls, tokens, time."""

    node_id: str
    node_type: str
    executions: int
    output_items: int
    errors: int
    model_calls: int
    tokens: int
    ms: float


@dataclass(frozen=True, slots=True)
class PassReport:
    """``liminalis pass show``: the definition, what is pending, the last run and its trace."""

    definition: PassDefinition
    pending: int
    last_run: RunRow | None
    nodes: tuple[NodeSummary, ...]
    errors: tuple[str, ...]

    def render(self) -> str:
        d = self.definition
        lines = [
            f"pass {d.name}: triggers {', '.join(d.triggers)}"
            + (f" (cron `{d.cron}` UTC)" if d.cron else ""),
            f"caps: {d.caps.node_executions} node executions, {d.caps.model_calls} model calls, "
            f"{d.caps.tokens} tokens; concurrency {d.concurrency}",
            "nodes: " + " ".join(f"{n.id}({n.type})" for n in d.nodes),
            f"pending documents: {self.pending}",
        ]
        run = self.last_run
        if run is None:
            lines.append("last run: never")
            return "\n".join(lines)
        lines.append(
            f"last run #{run.run_id} ({run.trigger}): {run.status}"
            + (f" — {run.reason}" if run.reason else "")
            + f"; {run.documents_done} done, {run.documents_failed} failed, "
            f"{run.documents_left} left; {run.node_executions} node executions, "
            f"{run.model_calls} model calls, {run.tokens} tokens"
        )
        for n in self.nodes:
            lines.append(
                f"  {n.node_id} ({n.node_type}): {n.executions}×, {n.output_items} items out, "
                f"{n.errors} with errors, {n.model_calls} calls, {n.tokens} tokens, {n.ms:.0f} ms"
            )
        lines += [f"  error: {e}" for e in self.errors[:5]]
        return "\n".join(lines)


def summarize(trace: list[TraceRow]) -> tuple[NodeSummary, ...]:
    """Per node, in the order nodes first ran."""
    by_node: dict[str, list[TraceRow]] = {}
    for t in trace:
        by_node.setdefault(t.node_id, []).append(t)
    return tuple(
        NodeSummary(
            node_id=node_id,
            node_type=rows[0].node_type,
            executions=len(rows),
            output_items=sum(r.output_size for r in rows),
            errors=sum(bool(r.error) for r in rows),
            model_calls=sum(r.model_calls for r in rows),
            tokens=sum(r.tokens for r in rows),
            ms=sum(r.ms for r in rows),
        )
        for node_id, rows in by_node.items()
    )


class Passes:
    """Pass definitions and runs over one database.

    Args:
        db: the store.
        model: what ``prompt-model`` nodes call (default: none, offline).
        gate: the credit gate (default: allow all).
        clock: the time source for runs and traces.
        registry: node types (default: :func:`~liminalis.passes.nodes.builtin_registry`).
    """

    def __init__(
        self,
        db: Database,
        *,
        clock: Clock,
        model: PassModel | None = None,
        gate: CreditGate | None = None,
        registry: NodeRegistry | None = None,
        batch_size: int = 8,
        max_concurrency: int = 4,
    ) -> None:
        self.db = db
        self.clock = clock
        self.registry = registry or builtin_registry()
        self.executor = Executor(
            db,
            model=model or NoPassModel(),
            gate=gate or AllowAllGate(),
            clock=clock,
            registry=self.registry,
            batch_size=batch_size,
            max_concurrency=max_concurrency,
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._busy: set[str] = set()
        self._again: set[str] = set()
        self.before_runs: list[BeforeRuns] = []
        self.after_runs: list[AfterRuns] = []

    def watch_progress(self, watcher: ProgressWatcher) -> Callable[[], None]:
        """Call ``watcher`` with how far each pass run has come (documents done of pending, rate,
        time left); returns the unsubscribe."""
        self.executor.watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self.executor.watchers:
                self.executor.watchers.remove(watcher)

        return unwatch

    async def _before(self, campaign: str) -> None:
        for hook in self.before_runs:
            try:
                await hook(campaign)
            except Exception:
                _log.exception("a before-runs hook failed for %s; the runs go on", campaign)

    async def _after(self, campaign: str, results: Sequence[RunResult]) -> None:
        for hook in self.after_runs:
            try:
                await hook(campaign, results)
            except Exception:
                _log.exception("an after-runs hook failed for %s", campaign)

    # -- definitions -------------------------------------------------------------------------

    async def save(self, campaign: str, definition: PassDefinition | str) -> bool:
        """Validate and store a definition (a :class:`PassDefinition`, or its JSON/TOML text);
        returns whether it changed (a changed one is run again over every document).

        Raises:
            InvalidInput: it does not validate; the message names the node.
        """
        if isinstance(definition, str):
            definition = parse_definition(definition)
        validate(definition, self.registry)
        return await self.db.passes.save_definition(
            campaign,
            definition.name,
            definition.to_json(),
            def_hash=definition.digest(),
            at=self.clock.now().timestamp(),
        )

    async def get(self, campaign: str, name: str) -> PassDefinition:
        row = await self.db.passes.definition(campaign, name)
        if row is None:
            raise NotFound(
                f"no pass {name!r} in {campaign}",
                user_message=f"No pass named `{name}` in this campaign.",
            )
        return parse_definition(row.definition, format="json")

    async def definitions(self, campaign: str) -> list[PassDefinition]:
        return [
            parse_definition(r.definition, format="json")
            for r in await self.db.passes.definitions(campaign)
        ]

    async def scheduled(self) -> list[tuple[str, PassDefinition]]:
        """``(campaign, definition)`` of every pass with a cron, for the scheduler's jobs."""
        out: list[tuple[str, PassDefinition]] = []
        for row in await self.db.passes.definitions():
            try:
                d = parse_definition(row.definition, format="json")
            except InvalidInput:
                _log.warning(
                    "pass %s of %s: stored definition unreadable", row.pass_id, row.campaign
                )
                continue
            if d.cron and "scheduled" in d.triggers:
                out.append((row.campaign, d))
        return out

    async def delete(self, campaign: str, name: str) -> bool:
        return await self.db.passes.delete_definition(campaign, name)

    # -- runs --------------------------------------------------------------------------------

    async def run(self, campaign: str, name: str, *, trigger: str = "requested") -> RunResult:
        """Run one pass now over its pending documents (``requested`` runs even when paused)."""
        if trigger not in TRIGGERS:
            raise InvalidInput(f"trigger {trigger!r}")
        await self._before(campaign)
        result = await self.executor.run(campaign, await self.get(campaign, name), trigger=trigger)
        await self._after(campaign, [result])
        return result

    async def run_triggered(self, campaign: str, trigger: str) -> list[RunResult]:
        """Run every pass of ``campaign`` that ``trigger`` starts; one failing does not stop
        the others."""
        await self._before(campaign)
        results: list[RunResult] = []
        for row in await self.db.passes.definitions(campaign):
            try:
                definition = parse_definition(row.definition, format="json")
                if trigger not in definition.triggers:
                    continue
                results.append(await self.executor.run(campaign, definition, trigger=trigger))
            except Exception:
                _log.exception("pass %s on %s (%s) failed", row.pass_id, campaign, trigger)
        await self._after(campaign, results)
        return results

    def on_ingested(self, campaign: str, report: IngestReport | None = None) -> None:
        """An ingest ended (tick or upload): run the campaign's ``changed`` passes in the
        background. Called on every ingest, changed or not: what is pending is decided by
        hashes, so documents left pending by a pause, a cap or the credit gate are picked up
        by the next one."""
        if campaign in self._busy:
            self._again.add(campaign)
            return
        self._busy.add(campaign)
        task = asyncio.get_running_loop().create_task(
            self._background(campaign), name=f"passes:{campaign}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._done)

    async def _background(self, campaign: str) -> None:
        try:
            while True:
                self._again.discard(campaign)
                await self.run_triggered(campaign, "changed")
                if campaign not in self._again:
                    return
        finally:
            self._busy.discard(campaign)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("background passes %s failed", task.get_name(), exc_info=task.exception())

    async def idle(self) -> None:
        """Wait for the background runs (tests; a clean shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Cancel the background runs: their unfinished documents stay pending."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- pause -------------------------------------------------------------------------------

    async def pause(self, campaign: str) -> None:
        """Stop autonomous runs of the campaign's passes (requested runs still run)."""
        await self.db.credits.pause(campaign, at=self.clock.now().timestamp())

    async def resume(self, campaign: str) -> bool:
        """Lift a pause; the next trigger processes everything that changed meanwhile."""
        return await self.db.credits.resume(campaign)

    async def paused(self, campaign: str) -> bool:
        return await self.db.credits.paused(campaign)

    # -- reports and facts -------------------------------------------------------------------

    async def report(self, campaign: str, name: str) -> PassReport:
        definition = await self.get(campaign, name)
        pending, _ = await self.executor.pending(campaign, name)
        runs = await self.db.passes.runs(campaign, name, limit=1)
        trace = await self.db.passes.trace(runs[0].run_id) if runs else []
        return PassReport(
            definition=definition,
            pending=len(pending),
            last_run=runs[0] if runs else None,
            nodes=summarize(trace),
            errors=tuple(f"{t.doc_id} {t.node_id}: {t.error}" for t in trace if t.error),
        )

    async def facts(
        self,
        campaign: str,
        lens: frozenset[str],
        *,
        pass_name: str | None = None,
        key: str | None = None,
        doc_id: str | None = None,
    ) -> list[Fact]:
        """The facts ``lens`` may see (a fact from a GM view is GM-only)."""
        return await self.db.passes.facts(
            campaign, lens=lens, pass_id=pass_name, key=key, doc_id=doc_id
        )
