"""Third-party log noise (Milvus Lite, gRPC, torch, transformers) stays out of the terminal
(bot/logs.py): debug only."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pymilvus  # noqa: F401  (imported first: it configures its own logger at import)
import pytest
from conftest import ROOT

from bot.logs import ThirdPartyToDebug, quiet_native_logs, route_logs

#: The loggers the tests speak through, and their parents (whose level a child inherits).
_SPEAKERS = (
    *("pymilvus", "pymilvus.decorators", "grpc", "grpc._channel"),
    *("transformers", "transformers.modeling_utils", "liminalis", "liminalis.ingest"),
)


@pytest.fixture
def console() -> Iterator[io.StringIO]:
    """The root logger's console handler as ``configure_logging`` leaves it, on a buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(ThirdPartyToDebug())
    root = logging.getLogger()
    level = root.level
    # What earlier tests in the same process may have left on the loggers said below (a level,
    # propagation off, a logger disabled by a dictConfig): start each test from the defaults.
    saved = []
    for name in _SPEAKERS:
        lg = logging.getLogger(name)
        saved.append((lg, lg.level, lg.propagate, lg.disabled))
        lg.setLevel(logging.NOTSET)
        lg.propagate, lg.disabled = True, False
    root.addHandler(handler)
    route_logs()  # pymilvus, imported above, gave its logger a stderr handler of its own
    try:
        yield buffer
    finally:
        for lg, lg_level, propagate, disabled in saved:
            lg.setLevel(lg_level)
            lg.propagate, lg.disabled = propagate, disabled
        root.removeHandler(handler)
        root.setLevel(level)
        logging.captureWarnings(False)
        for other in root.handlers:  # pytest's own capture handlers
            for f in [f for f in other.filters if isinstance(f, ThirdPartyToDebug)]:
                other.removeFilter(f)


def _say_all() -> None:
    logging.getLogger("pymilvus.decorators").warning("RPC error: too_many_pings GOAWAY")
    logging.getLogger("grpc._channel").error("channel closed")
    logging.getLogger("transformers.modeling_utils").warning("some weights were not used")
    logging.getLogger("liminalis.ingest").warning("greyhold: notes.md not indexed")


def test_library_lines_stay_off_the_console_and_ours_stay_on(console):
    logging.getLogger().setLevel(logging.WARNING)
    _say_all()
    assert console.getvalue() == "WARNING liminalis.ingest: greyhold: notes.md not indexed\n"


def test_at_debug_the_library_lines_are_there_as_debug(console):
    logging.getLogger().setLevel(logging.DEBUG)
    _say_all()
    lines = console.getvalue().splitlines()
    assert "DEBUG pymilvus.decorators: RPC error: too_many_pings GOAWAY" in lines
    assert "DEBUG grpc._channel: channel closed" in lines
    assert "WARNING liminalis.ingest: greyhold: notes.md not indexed" in lines


def test_a_library_warning_is_debug_and_ours_is_not(console):
    logging.getLogger().setLevel(logging.WARNING)
    logging.captureWarnings(True)
    try:
        warnings_log = logging.getLogger("py.warnings")
        warnings_log.warning(
            "%s", "/venv/lib/site-packages/torch/x.py:1: UserWarning: TypedStorage"
        )
        warnings_log.warning("%s", "/work/liminalis/engine.py:1: UserWarning: ours")
    finally:
        logging.captureWarnings(False)
    assert "TypedStorage" not in console.getvalue() and "ours" in console.getvalue()


def test_grpc_and_transformers_are_quieted_unless_the_host_chose():
    environ = {"GRPC_VERBOSITY": "DEBUG"}
    quiet_native_logs(environ)
    assert environ["GRPC_VERBOSITY"] == "DEBUG"  # a developer chasing a gRPC problem
    assert environ["GRPC_TRACE"] == "" and environ["TRANSFORMERS_VERBOSITY"] == "error"
    fresh: dict[str, str] = {}
    quiet_native_logs(fresh)
    assert fresh["GRPC_VERBOSITY"] == "NONE"


def test_the_cli_entry_quiets_grpc_before_anything_imports_it():
    """gRPC's C core reads GRPC_VERBOSITY once, at import: importing the CLI must not import
    grpc, and ``main`` sets it first."""
    code = (
        "import os, sys\n"
        "os.environ.pop('GRPC_VERBOSITY', None)\n"
        "import bot.cli\n"
        "assert 'grpc' not in sys.modules and 'pymilvus' not in sys.modules\n"
        "bot.cli.main(['models'])\n"
        "print('verbosity', os.environ['GRPC_VERBOSITY'])\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert "verbosity NONE" in r.stdout


GRPC_PROBE = (
    "import grpc\n"
    "channel = grpc.insecure_channel('unix:/nonexistent/liminalis.sock')\n"
    "try:\n"
    "    grpc.channel_ready_future(channel).result(timeout=0.5)\n"
    "except grpc.FutureTimeoutError:\n"
    "    pass\n"
)


@pytest.mark.parametrize("quiet", [False, True])
def test_grpcs_c_core_writes_to_stderr_only_until_quieted(quiet):
    """The C core logs below Python's logging; a tracer makes it speak at once (as
    ``too_many_pings`` does after a minute idle against Milvus Lite)."""
    prelude = "from bot.logs import quiet_native_logs\nquiet_native_logs()\n" if quiet else ""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    r = subprocess.run(
        [sys.executable, "-c", prelude + GRPC_PROBE],
        cwd=ROOT,
        env={**env, "GRPC_TRACE": "connectivity_state", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert ("connectivity_state" in r.stderr) is not quiet
