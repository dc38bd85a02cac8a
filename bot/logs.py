"""Where log lines go: ours to the console at the configured level, the libraries' to debug.

The person at the terminal (``liminalis ingest``, ``make run``'s chat, ``serve``'s console) is a
host or a GM, not a developer of Milvus, gRPC, torch or transformers: a ``GOAWAY`` /
``too_many_pings`` line from the gRPC channel to Milvus Lite after a minute idle, or a torch
``UserWarning``, tells them nothing they can act on, and lands in the middle of a conversation.
Two kinds of noise, two routes:

* gRPC's C core writes to file descriptor 2 itself, below Python's logging, and reads
  ``GRPC_VERBOSITY`` / ``GRPC_TRACE`` once, when ``grpc`` is first imported. So
  :func:`quiet_native_logs` sets them (unless the host set them: a developer chasing a gRPC
  problem still can) at the CLI's entry, before anything imports ``grpc``. transformers keeps
  its own stderr handler; ``TRANSFORMERS_VERBOSITY`` turns it down the same way, and
  ``HF_HUB_DISABLE_PROGRESS_BARS`` its weight-loading bar.
* Python loggers of those libraries propagate to the root handler (pymilvus and transformers
  give theirs a stderr handler of their own at import, and stop propagation: :func:`route_logs`
  takes those back, so call it again once they are imported), where
  :class:`ThirdPartyToDebug` rewrites each record's level to DEBUG: with
  ``LIMINALIS_LOG_LEVEL=DEBUG`` they are all there, at any other level none is shown.
  Python ``warnings`` raised inside an installed library are logged (``captureWarnings``) and
  demoted alike.
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping

__all__ = ["THIRD_PARTY_LOGGERS", "ThirdPartyToDebug", "quiet_native_logs", "route_logs"]

#: Top-level logger names whose records are demoted to DEBUG.
THIRD_PARTY_LOGGERS = frozenset(
    {
        "pymilvus",
        "milvus_lite",
        "grpc",
        "torch",
        "transformers",
        "sentence_transformers",
        "huggingface_hub",
        "filelock",
        "urllib3",
    }
)

#: Environment read by native code or by a library's own handler at import.
_NATIVE_QUIET = {
    "GRPC_VERBOSITY": "NONE",
    "GRPC_TRACE": "",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    # transformers draws a "Loading weights" bar (huggingface_hub's switch) at every model load:
    # a host ingesting a campaign wants its documents counted, not the embedder's tensors.
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}


def quiet_native_logs(environ: MutableMapping[str, str] = os.environ) -> None:
    """Silence the logging that bypasses Python's: call before ``grpc`` or ``transformers`` is
    imported (the CLI's ``main`` does, first). A value the host set is kept."""
    for name, value in _NATIVE_QUIET.items():
        environ.setdefault(name, value)


class ThirdPartyToDebug(logging.Filter):
    """A handler filter: a library's record becomes a DEBUG record, shown only when the root
    logger is at DEBUG; every other record passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _third_party(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def _third_party(record: logging.LogRecord) -> bool:
    if record.name.split(".", 1)[0] in THIRD_PARTY_LOGGERS:
        return True
    # ``captureWarnings`` logs a warning as "<file>:<line>: <category>: <text>".
    return record.name == "py.warnings" and "-packages" in record.getMessage()


def route_logs() -> None:
    """Put :class:`ThirdPartyToDebug` on every root handler (once each), log warnings, and take
    back the libraries' loggers imported so far. Idempotent."""
    logging.captureWarnings(True)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, ThirdPartyToDebug) for f in handler.filters):
            handler.addFilter(ThirdPartyToDebug())
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if name.split(".", 1)[0] in THIRD_PARTY_LOGGERS and isinstance(logger, logging.Logger):
            _reclaim(logger)


def _reclaim(logger: logging.Logger) -> None:
    """A library logger that writes to stderr itself (its own handler, propagation off) goes
    through the root handler instead, at the root's level."""
    if logger.propagate and not logger.handlers:
        return
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.propagate = True
    logger.setLevel(logging.NOTSET)
