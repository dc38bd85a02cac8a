"""Settings, read once at the edge from the environment (prefix ``LIMINALIS_``).

Secrets are ``repr=False`` so they never print or reach logs. Validation happens here, at
startup, with a named message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from liminalis.context import DEFAULT_CONTEXT_TOKENS
from liminalis.errors import ConfigError
from liminalis.routing.roles import ROLES, RoleTable

__all__ = ["Settings"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _bool(name: str, raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, not {raw!r}")


def _int(name: str, raw: str, *, minimum: int = 0) -> int:
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise ConfigError(f"{name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}")
    return value


@dataclass(frozen=True)
class Settings:
    """Every setting of the service. See ``.env.example`` for one line per field."""

    data_dir: Path = Path("data")
    campaigns_dir: Path = Path("campaigns")
    default_campaign: str = "emberfall"
    milvus_uri: str = (
        ""  # default: <data_dir>/milvus.db (Milvus Lite); http://host:19530 for a server
    )
    milvus_token: str = field(default="", repr=False)
    #: The shipped models' directory; empty: the checkout's models/, else the installed copy.
    models_dir: str = ""
    embedder: str = (
        "auto"  # auto: models/embedder if present, else bundled:all-MiniLM-L6-v2; or a name/path
    )
    reranker: str = (
        "auto"  # auto: the shipped model if present; none: off; else a CrossEncoder name/path
    )
    reranker_int8: bool = (
        False  # int8 dynamic quantization: ~1.5x faster, but it reorders the shipped model's scores
    )
    ranker: str = "auto"  # learned document ranker: auto (models/ranker if present), none, or a ranker.json path
    query_adapter: str = (
        "auto"  # dense-arm query map: auto (models/query-adapter if present), none, or a path
    )
    contextual: bool = True
    #: Also embed overlapping sentence windows of each passage (liminalis.ingest.chunking): off
    #: by default, they help a dense arm that carries weight but triple the collection.
    sentence_windows: bool = False
    #: Embedders kept loaded beside ``embedder`` (names or paths, comma-separated): a campaign
    #: indexed with one of them goes on answering from its vector generation until
    #: ``liminalis reindex`` publishes the next one (liminalis.generations).
    previous_embedders: tuple[str, ...] = ()
    #: How long a replaced vector generation is kept for ``liminalis reindex --rollback``.
    reindex_grace_hours: float = 168.0
    #: The campaign memory (liminalis.memory): off until the memory benchmark shows it helps.
    memory_enabled: bool = False
    memory_orchestration: str = "loop"  # loop | resonance
    max_upload_bytes: int = 5 * 1024 * 1024
    log_level: str = "INFO"
    # The model of each role (liminalis.routing.roles). Empty: ``chat`` takes the reply model,
    # every background role the cheap one.
    model_reply: str = "claude-sonnet-4-5"
    model_cheap: str = "claude-haiku-4-5"
    model_chat: str = ""
    model_scaffolding: str = ""
    model_critique: str = ""
    model_summarize: str = ""
    model_extract: str = ""
    model_narration: str = ""
    model_analysis: str = ""
    #: Model calls in flight at once; background work may take ``background_share`` of them
    #: and of the day's remaining tokens.
    model_concurrency: int = 8
    background_share: float = 0.5
    #: Background credits (tokens) of a campaign never topped up (``liminalis credits``).
    campaign_credits: int = 200_000
    llm_timeout_s: float = 60.0
    context_budget_tokens: int = DEFAULT_CONTEXT_TOKENS
    daily_token_budget: int = 2_000_000
    discord_guild_ids: tuple[int, ...] = ()
    #: Users (Discord or Slack user ids) who may ``/campaign create`` besides a Discord server's
    #: managers and a Slack workspace's admins and owners.
    campaign_creators: tuple[str, ...] = ()
    discord_shards: bool = False
    tick_seconds: int = 300
    anthropic_base_url: str = ""
    discord_token: str = field(default="", repr=False)
    slack_bot_token: str = field(default="", repr=False)
    slack_app_token: str = field(default="", repr=False)
    slack_signing_secret: str = field(default="", repr=False)
    anthropic_api_key: str = field(default="", repr=False)

    def role_table(self) -> RoleTable:
        """The model of every role (``LIMINALIS_MODEL_<ROLE>``, else the reply or cheap model)."""
        try:
            return RoleTable.build(
                reply=self.model_reply,
                cheap=self.model_cheap,
                assigned={r: getattr(self, f"model_{r}") for r in ROLES if r != "reply"},
            )
        except ValueError as exc:
            raise ConfigError(f"model roles: {exc}") from None

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "liminalis.sqlite3"

    @property
    def resolved_milvus_uri(self) -> str:
        return self.milvus_uri or str(self.data_dir / "milvus.db")

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, env_file: Path | None = Path(".env")
    ) -> Settings:
        """Settings from ``env`` (default: the process environment over ``env_file``, the
        ``.env`` of the working directory when there is one; the real environment wins)."""
        if env is None:
            from dotenv import dotenv_values

            found = (
                {k: v for k, v in dotenv_values(env_file).items() if v is not None}
                if env_file and env_file.is_file()
                else {}
            )
            env = {**found, **os.environ}
        kw: dict[str, object] = {}
        unprefixed = {
            "discord_token": "DISCORD_TOKEN",
            "slack_bot_token": "SLACK_BOT_TOKEN",
            "slack_app_token": "SLACK_APP_TOKEN",
            "slack_signing_secret": "SLACK_SIGNING_SECRET",
            "anthropic_api_key": "ANTHROPIC_API_KEY",
            "anthropic_base_url": "ANTHROPIC_BASE_URL",
        }
        for f in fields(cls):
            name = unprefixed.get(f.name, f"LIMINALIS_{f.name.upper()}")
            raw = env.get(name)
            if (
                raw is None or not raw.strip()
            ):  # a blanked line in .env means "the default", not "off"
                continue
            if f.type in ("Path",):
                kw[f.name] = Path(raw)
            elif f.type == "bool":
                kw[f.name] = _bool(name, raw)
            elif f.type == "int":
                kw[f.name] = _int(name, raw)
            elif f.type == "float":
                try:
                    kw[f.name] = float(raw)
                except ValueError:
                    raise ConfigError(f"{name} must be a number, not {raw!r}") from None
            elif f.type == "tuple[int, ...]":
                kw[f.name] = tuple(_int(name, x.strip()) for x in raw.split(",") if x.strip())
            elif f.type == "tuple[str, ...]":
                kw[f.name] = tuple(x.strip() for x in raw.split(",") if x.strip())
            else:
                kw[f.name] = raw.strip()
        settings = cls(**kw)  # type: ignore[arg-type]
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.log_level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ConfigError(
                f"LIMINALIS_LOG_LEVEL must be DEBUG/INFO/WARNING/ERROR, not {self.log_level!r}"
            )
        if self.slack_bot_token and not self.slack_app_token:
            raise ConfigError(
                "SLACK_BOT_TOKEN is set but SLACK_APP_TOKEN (xapp-…, Socket Mode) is missing"
            )
        if self.max_upload_bytes < 1024:
            raise ConfigError("LIMINALIS_MAX_UPLOAD_BYTES must be at least 1024")
        if not 500 <= self.context_budget_tokens <= 200_000:  # the range /budget set allows
            raise ConfigError("LIMINALIS_CONTEXT_BUDGET_TOKENS must be between 500 and 200,000")
        if self.daily_token_budget < 0:
            raise ConfigError("LIMINALIS_DAILY_TOKEN_BUDGET must be 0 (no limit) or more")
        if self.model_concurrency < 2:
            raise ConfigError(
                "LIMINALIS_MODEL_CONCURRENCY must be at least 2 (one kept for replies)"
            )
        if not 0 < self.background_share < 1:
            raise ConfigError("LIMINALIS_BACKGROUND_SHARE must be between 0 and 1, e.g. 0.5")
        if not self.model_reply.strip() or not self.model_cheap.strip():
            raise ConfigError("LIMINALIS_MODEL_REPLY and LIMINALIS_MODEL_CHEAP must name models")
