"""``AnthropicModel``: the ``LanguageModel`` port over the official ``anthropic`` async client.

* System blocks go out as text blocks; the last stable block (``cache_upto − 1``) carries
  ``cache_control: {"type": "ephemeral"}``, so the stable half is a cached prefix.
* Model names are per role (``{"reply": ..., "summarize": ...}``); unknown roles use ``reply``;
  a call's ``model`` argument (the router's role table, a per-chat override) wins over both.
* Usage, including ``cache_creation_input_tokens`` and ``cache_read_input_tokens``, is kept on
  ``last_usage`` and summed per role in ``usage_by_role``.
* Retries are ours, not the SDK's (its ``max_retries`` is 0), so the policy is one place and the
  backoff is injectable: timeouts, connection errors, 429, 529 and other 5xx are retried with
  exponential backoff ``delay_n = min(max_backoff_s, backoff_s · 2ⁿ)`` (or the server's
  ``retry-after`` when larger, capped the same); then :class:`~liminalis.errors.ModelUnavailable`.
  Authentication failures become :class:`~liminalis.errors.ConfigError`. SDK exceptions never
  leave this module untranslated, nor does anything raised beneath the SDK's own classes while a
  reply is read (a connection cut mid-body, a malformed SSE line, a 200 whose body is not JSON):
  a fault in reading the reply is retried like a connection error.
* A stream that breaks after text was delivered is not retried (the text is shown already): it
  raises :class:`~liminalis.errors.ModelUnavailable` with the ``partial`` text and the tokens
  ``used`` by then (the input as ``message_start`` reported it, the output at least
  ``⌈characters / 4⌉``), which the router settles the booking at.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import anthropic

from liminalis.errors import ConfigError, ModelUnavailable
from liminalis.ports import Completion, Message, Usage

__all__ = ["AnthropicModel", "DEFAULT_MODELS"]

_log = logging.getLogger(__name__)
DEFAULT_MODELS: dict[str, str] = {"reply": "claude-sonnet-5-5", "summarize": "claude-haiku-5-5"}
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    return Usage(
        input_tokens=int(getattr(raw, "input_tokens", 0) or 0),
        output_tokens=int(getattr(raw, "output_tokens", 0) or 0),
        cache_creation_input_tokens=int(getattr(raw, "cache_creation_input_tokens", 0) or 0),
        cache_read_input_tokens=int(getattr(raw, "cache_read_input_tokens", 0) or 0),
    )


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        a.cache_read_input_tokens + b.cache_read_input_tokens,
    )


class _Retryable(Exception):
    def __init__(self, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


def _classify(exc: Exception) -> Exception:
    """Map an SDK exception to ``_Retryable`` or a final ``LiminalisError``."""
    if isinstance(exc, anthropic.APITimeoutError):
        return _Retryable("timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return _Retryable(f"connection error: {type(exc).__name__}")
    if isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)):
        return ConfigError(f"anthropic rejected the API key ({exc.status_code})")
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code in _RETRY_STATUS:
            after: float | None = None
            try:
                after = float(exc.response.headers.get("retry-after", ""))
            except (TypeError, ValueError):
                after = None
            return _Retryable(f"HTTP {exc.status_code}", after)
        if exc.status_code in {400, 404, 413, 422}:
            # The request itself is wrong (an unknown model name, a request too large): retrying
            # in a minute, as "busy" would suggest, never helps. The host must fix a setting.
            return ConfigError(
                f"anthropic refused the request: HTTP {exc.status_code} (check LIMINALIS_MODEL_REPLY "
                "and LIMINALIS_CONTEXT_BUDGET_TOKENS)"
            )
        return ModelUnavailable(f"anthropic refused the request: HTTP {exc.status_code}")
    return ModelUnavailable(f"anthropic client error: {type(exc).__name__}")


def _fault(exc: Exception) -> Exception:
    """Map any exception a call raised to ``_Retryable`` or a final ``LiminalisError``: the SDK's
    own through :func:`_classify`, anything else (the transport's, the SSE decoder's, the JSON
    parser's, the SDK's assertions on a body it cannot read) as a reply that could not be read."""
    if isinstance(exc, anthropic.AnthropicError):
        if isinstance(exc, anthropic.APIStatusError) and exc.status_code == 200:
            # An ``error`` event inside a stream that had started (overloaded mid-answer).
            return _Retryable(f"error event in the stream: {_error_type(exc)}")
        return _classify(exc)
    kind = type(exc).__name__
    if isinstance(exc, TimeoutError) or "timeout" in kind.lower():
        return _Retryable(f"timed out reading the reply ({kind})")
    if isinstance(exc, ValueError):  # json.JSONDecodeError, a malformed SSE field
        return _Retryable(f"malformed reply ({kind})")
    return _Retryable(f"reply could not be read ({kind})")


def _error_type(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("type") or "error")
    return "error"


def _partial_usage(started: Any, text: str) -> Usage:
    """What a stream that broke after ``text`` used: the usage its ``message_start`` reported
    (``started``: the SDK's snapshot, ``None`` before it), the output at least the text's
    ``⌈characters / 4⌉`` (the API reports the output only at the end)."""
    usage = _usage(getattr(started, "usage", None))
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=max(usage.output_tokens, -(-len(text) // 4)),
        cache_creation_input_tokens=usage.cache_creation_input_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens,
    )


class AnthropicModel:
    """Claude through ``anthropic.AsyncAnthropic``. Use as ``async with`` (closes the client).

    Args:
        api_key: the Anthropic API key (never logged, never in ``repr``).
        base_url: API root (a local fake in tests).
        models: model name per role; ``reply`` is required (defaults filled in).
        timeout_s: per-attempt timeout.
        max_retries: retries after the first attempt for retryable failures.
        backoff_s / max_backoff_s: exponential backoff base and cap.
        sleep: injectable sleep (tests pass a no-op).
    """

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        models: Mapping[str, str] | None = None,
        timeout_s: float = 60,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 20.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not api_key:
            raise ConfigError("ANTHROPIC_API_KEY is empty")
        self.models = {**DEFAULT_MODELS, **(models or {})}
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
        )
        self.last_usage: Usage = Usage()
        self.usage_by_role: dict[str, Usage] = {}

    def __repr__(self) -> str:
        return f"AnthropicModel(models={self.models!r})"

    @property
    def name(self) -> str:
        return self.models["reply"]

    def model_for(self, role: str) -> str:
        return self.models.get(role) or self.models["reply"]

    async def __aenter__(self) -> AnthropicModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._client.close()

    # -- request shaping ---------------------------------------------------------------------

    @staticmethod
    def system_blocks(system: Sequence[str], cache_upto: int) -> list[dict[str, Any]]:
        """Text blocks, the breakpoint on the last non-empty stable block; empty blocks skipped."""
        blocks: list[dict[str, Any]] = []
        breakpoint_at = -1
        for i, text in enumerate(system):
            if not text:
                continue
            blocks.append({"type": "text", "text": text})
            if i < cache_upto:
                breakpoint_at = len(blocks) - 1
        if breakpoint_at >= 0:
            blocks[breakpoint_at]["cache_control"] = {"type": "ephemeral"}
        return blocks

    def _params(
        self,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int,
        max_tokens: int,
        role: str,
        model: str | None = None,
    ) -> dict[str, Any]:
        return {
            "model": model or self.model_for(role),
            "max_tokens": max_tokens,
            "system": self.system_blocks(system, cache_upto),
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }

    def _record(self, role: str, usage: Usage) -> None:
        self.last_usage = usage
        self.usage_by_role[role] = _add(self.usage_by_role.get(role, Usage()), usage)

    async def _backoff(self, attempt: int, err: _Retryable) -> None:
        delay = min(self.max_backoff_s, self.backoff_s * (2**attempt))
        if err.retry_after is not None:
            delay = min(self.max_backoff_s, max(delay, err.retry_after))
        _log.warning(
            "anthropic %s; retry %d/%d in %.2fs", err, attempt + 1, self.max_retries, delay
        )
        await self._sleep(delay)

    # -- LanguageModel -----------------------------------------------------------------------

    async def complete(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> Completion:
        params = self._params(system, messages, cache_upto, max_tokens, role, model)
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            try:
                msg = await self._client.messages.create(**params)
            except Exception as exc:  # every fault of the call: _fault names it
                err = _fault(exc)
                if not isinstance(err, _Retryable):
                    raise err from exc
                last = str(err)
                if attempt == self.max_retries:
                    raise ModelUnavailable(
                        f"anthropic unavailable after {attempt + 1} attempts: {last}"
                    ) from exc
                await self._backoff(attempt, err)
                continue
            text = "".join(
                getattr(b, "text", "") for b in msg.content if getattr(b, "type", "") == "text"
            )
            usage = _usage(msg.usage)
            self._record(role, usage)
            return Completion(
                text=text, model=msg.model, usage=usage, stop_reason=msg.stop_reason or ""
            )
        raise ModelUnavailable(f"anthropic unavailable: {last}")

    async def stream(
        self,
        *,
        system: Sequence[str],
        messages: Sequence[Message],
        cache_upto: int = 0,
        max_tokens: int = 800,
        role: str = "reply",
        model: str | None = None,
    ) -> AsyncIterator[str]:
        """Yield text deltas; retries only before the first delta (a half answer is not resent).

        Raises:
            ModelUnavailable: with ``partial`` and ``used`` when the stream broke after text.
        """
        params = self._params(system, messages, cache_upto, max_tokens, role, model)
        for attempt in range(self.max_retries + 1):
            sent: list[str] = []
            started: Any = None
            try:
                async with self._client.messages.stream(**params) as s:
                    async for text in s.text_stream:
                        if not sent:
                            started = s.current_message_snapshot
                        sent.append(text)
                        yield text
                    final = await s.get_final_message()
                self._record(role, _usage(final.usage))
                return
            except Exception as exc:  # every fault of the call or of reading it: _fault names it
                err = _fault(exc)
                if sent:
                    partial = "".join(sent)
                    used = _partial_usage(started, partial)
                    self._record(role, used)
                    raise ModelUnavailable(
                        f"anthropic stream broke after {len(partial)} characters: {err}",
                        partial=partial,
                        used=used,
                    ) from exc
                if not isinstance(err, _Retryable):
                    raise err from exc
                if attempt == self.max_retries:
                    raise ModelUnavailable(f"anthropic stream failed: {err}") from exc
                await self._backoff(attempt, err)
