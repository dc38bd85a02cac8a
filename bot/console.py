"""The console adapter: ``liminalis chat`` — the embedded default, no tokens needed.

Same commands as Discord and Slack (``/ask …``, ``/pin …``); a bare line is a question.
``--lens gm`` (or ``players,mirel``) tries the other views. Goes through ``BotService.handle``
exactly like the platform adapters.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from bot.service import BotService, IncomingMessage, Reply

__all__ = ["ConsoleAdapter", "format_reply"]


def format_reply(reply: Reply) -> str:
    out = [reply.text]
    if reply.sources:
        out.append("Sources: " + "; ".join(s.label() for s in reply.sources))
    return "\n".join(out)


class ConsoleAdapter:
    def __init__(self, service: BotService, *, campaign: str, lens: str = "players", user: str = "console") -> None:
        self.service = service
        self.campaign = campaign
        self.roles = tuple(x.strip() for x in lens.split(",") if x.strip())
        self.user = user

    def message(self, text: str) -> IncomingMessage:
        return IncomingMessage(platform="console", channel_id="console", user_id=self.user, text=text,
                               roles=self.roles, campaign_override=self.campaign)

    async def ask(self, text: str) -> Reply:
        return await self.service.handle(self.message(text))

    async def run(self, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout,
                  input_fn: Callable[[str], str] | None = None) -> None:
        interactive = stdin.isatty()
        stdout.write(f"Liminalis — campaign '{self.campaign}', lens {','.join(self.roles)}. /help for commands, /quit to leave.\n")
        stdout.flush()
        while True:
            try:
                if interactive:
                    line = await asyncio.to_thread(input_fn or input, "> ")
                else:
                    line = await asyncio.to_thread(stdin.readline)
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
            stdout.write(format_reply(reply) + "\n\n")
            stdout.flush()
