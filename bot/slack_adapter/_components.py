"""Components: presses of our buttons (``block_actions``) and forms sent (``view_submission``),
``lm:…`` ids checked and run by ``BotService.press``."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from bot.messages import Reply
from bot.presses import opens_form
from bot.slack_adapter._inbound import Inbound
from bot.slack_adapter._render import (
    render_modal,
)
from bot.slack_adapter._state import NEUTRAL

__all__ = ["ACTION", "Components"]

_log = logging.getLogger(__name__)
ACTION = re.compile(r"^lm:")


class Components(Inbound):
    """Buttons and forms: a press is a request like any other, with its action id."""

    async def _on_action(
        self, body: dict[str, Any], respond: Callable[..., Awaitable[Any]]
    ) -> None:
        """A button of ours pressed: checked and run by ``BotService.press``; its reply goes in
        place of the pressed message, to the channel, to the presser alone, or opens a form."""
        action = str(((body.get("actions") or [{}])[0]).get("action_id") or "")
        user = str((body.get("user") or {}).get("id") or "")
        container = body.get("container") or {}
        channel = str((body.get("channel") or {}).get("id") or container.get("channel_id") or "")
        home = container.get("type") == "view"
        dm_channel = str((body.get("view") or {}).get("private_metadata") or "") if home else ""
        try:
            msg = await self.incoming(
                user_id=user,
                channel_id=channel or dm_channel,
                text="",
                is_dm=home or channel.startswith("D"),
                bot_dm=home or await self._is_app_dm(channel, user),
            )
            reply = await self.service.press(msg, action)
            if reply.form is not None and not reply.error and opens_form(action):
                metadata = json.dumps({"channel": channel, "dm": dm_channel})
                await self.client.views_open(
                    trigger_id=body.get("trigger_id", ""),
                    view=render_modal(reply.form, metadata=metadata),
                )
                return
        except Exception:
            _log.exception("slack button %s failed", action[:40])
            reply = Reply(text=NEUTRAL, ephemeral=True, error=True)
        await self._deliver(
            reply,
            user=user,
            channel=channel,
            dm_channel=dm_channel,
            thread_ts=container.get("thread_ts"),
            respond=respond if body.get("response_url") else None,
        )

    async def _on_form(self, body: dict[str, Any]) -> None:
        """A form of ours sent (a 👎's reason, a question from the Home tab)."""
        view = body.get("view") or {}
        action = str(view.get("callback_id") or "")
        user = str((body.get("user") or {}).get("id") or "")
        try:
            where = json.loads(view.get("private_metadata") or "{}")
        except ValueError:
            where = {}
        channel, dm_channel = str(where.get("channel") or ""), str(where.get("dm") or "")
        values = ((view.get("state") or {}).get("values") or {}).get("value") or {}
        value = str((values.get("value") or {}).get("value") or "")
        try:
            msg = await self.incoming(
                user_id=user,
                channel_id=channel or dm_channel,
                text="",
                is_dm=not channel or channel.startswith("D"),
                bot_dm=not channel or await self._is_app_dm(channel, user),
            )
            reply = await self.service.press(msg, action, value)
        except Exception:
            _log.exception("slack form %s failed", action[:40])
            reply = Reply(text=NEUTRAL, ephemeral=True, error=True)
        await self._deliver(
            reply, user=user, channel=channel, dm_channel=dm_channel, thread_ts=None, respond=None
        )
