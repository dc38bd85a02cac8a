"""The console adapter: ``liminalis chat`` — the embedded default, no tokens needed.

Same commands as Discord and Slack (``/ask …``, ``/pin …``); a bare line is a question.
``--lens gm`` (or ``players,mirel``) tries the other views. Goes through ``BotService.handle``
exactly like the platform adapters. A reply's files (``/map``'s picture) are written to
``files_dir`` and their paths printed.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from bot.service import BotService, IncomingMessage, Reply
from liminalis.errors import LiminalisError
from liminalis.lens import GM, PLAYERS

__all__ = ["ConsoleAdapter", "format_reply", "save_files"]


async def _blocking(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a daemon thread. Not ``asyncio.to_thread``: on Ctrl-C, ``asyncio.run``
    waits for its executor's threads, and one blocked in ``input()`` would hold the exit until
    the next Enter."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not done.done():
            done.set_result(value) if ok else done.set_exception(value)

    def work() -> None:
        try:
            result, ok = fn(*args), True
        except BaseException as exc:  # EOFError, KeyboardInterrupt: handed to the awaiting side
            result, ok = exc, False
        try:
            loop.call_soon_threadsafe(settle, ok, result)
        except RuntimeError:  # the loop closed first (the user left)
            pass

    threading.Thread(target=work, daemon=True).start()
    return await done


def format_reply(reply: Reply, saved: Sequence[Path] = ()) -> str:
    out = [reply.text]
    if reply.sources:
        out.append("Sources: " + "; ".join(s.label() for s in reply.sources))
    out += [f"File: {p}" for p in saved]
    return "\n".join(out)


def save_files(reply: Reply, folder: Path) -> list[Path]:
    """Write ``reply``'s files into ``folder`` (created), each under its own name made safe."""
    if not reply.files:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for f in reply.files:
        name = Path(f.filename).name.lstrip(".") or "file"
        path = folder / name
        path.write_bytes(f.data)
        out.append(path.resolve())
    return out


class ConsoleAdapter:
    def __init__(
        self,
        service: BotService,
        *,
        campaign: str,
        lens: str = "players",
        user: str = "console",
        files_dir: Path = Path("data") / "files",
    ) -> None:
        self.service = service
        self.files_dir = files_dir
        self.campaign = campaign
        self.roles = tuple(x.strip().lower() for x in lens.split(",") if x.strip())
        self.user = user

    def message(self, text: str) -> IncomingMessage:
        return IncomingMessage(
            platform="console",
            channel_id="console",
            user_id=self.user,
            text=text,
            roles=self.roles,
            campaign_override=self.campaign,
        )

    async def ask(self, text: str) -> Reply:
        return await self.service.handle(self.message(text))

    async def run(
        self,
        stdin: TextIO = sys.stdin,
        stdout: TextIO = sys.stdout,
        input_fn: Callable[[str], str] | None = None,
    ) -> None:
        interactive = stdin.isatty()
        try:
            cfg = await self.service.config(self.campaign)
        except LiminalisError as exc:
            stdout.write(f"{exc.user_message}\n")
            stdout.flush()
            return
        # The lens in effect, not the one asked for: a name the campaign does not define is dropped.
        lens = await self.service.lens_of(self.message(""), cfg)
        unknown = [r for r in self.roles if r not in lens and r not in {GM, PLAYERS}]
        if unknown:
            stdout.write(
                f"Unknown lens name(s) {', '.join(unknown)}; this campaign's: "
                f"{', '.join([GM, PLAYERS, *cfg.lenses])}.\n"
            )
        stdout.write(
            f"Liminalis — campaign '{self.campaign}', lens {','.join(sorted(lens))}. "
            "/help for commands, /quit to leave.\n"
        )
        stdout.flush()
        while True:
            try:
                if interactive:
                    line = await _blocking(input_fn or input, "> ")
                else:
                    line = await _blocking(stdin.readline)
                    if not line:
                        break
            except (EOFError, KeyboardInterrupt):
                break
            line = line.strip()
            if not line:
                continue
            if line in {"/quit", "/exit"}:
                break
            reply = await self.ask(line)
            saved = await asyncio.to_thread(save_files, reply, self.files_dir)
            stdout.write(format_reply(reply, saved) + "\n\n")
            stdout.flush()
