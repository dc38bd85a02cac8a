"""Components: presses of our buttons and forms sent (``lm:…`` ids), checked and run by
``BotService.press``; the buttons and modals themselves are drawn by ``_render``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import discord

from bot.discord_adapter._inbound import Inbound
from bot.discord_adapter._render import form_modal
from bot.discord_adapter._state import NEUTRAL, NO_MENTIONS
from bot.presses import opens_form

__all__ = ["Components"]

_log = logging.getLogger(__name__)


class Components(Inbound):
    """Buttons and forms: a press is a request like any other, with its action id."""

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A press of one of our buttons (``lm:…``) or a form sent: checked and run by
        ``BotService.press``. A press that opens a form answers with the modal (Discord allows
        it only as the first response); every other press is acknowledged at once (a deferred
        update: no "thinking…" message) and answered privately, publicly or in place."""
        kind = interaction.type
        if kind not in (discord.InteractionType.component, discord.InteractionType.modal_submit):
            return
        data: Mapping[str, Any] = interaction.data or {}
        action = str(data.get("custom_id") or "")
        if not action.startswith("lm:"):
            return
        try:
            msg = self.from_interaction(interaction)
            if kind == discord.InteractionType.component and opens_form(action):
                reply = await self.service.press(msg, action)
                if reply.form is not None and not reply.error:
                    await interaction.response.send_modal(form_modal(reply.form))
                else:
                    await interaction.response.send_message(
                        reply.text, ephemeral=True, allowed_mentions=NO_MENTIONS
                    )
                return
            await interaction.response.defer()
            value = _form_value(data) if kind == discord.InteractionType.modal_submit else ""
            reply = await self.service.press(msg, action, value)
            await self.deliver(interaction, reply)
        except Exception:
            _log.exception("discord button %s failed", action[:40])
            try:
                await interaction.followup.send(
                    NEUTRAL, ephemeral=True, allowed_mentions=NO_MENTIONS
                )
            except discord.HTTPException:
                pass


def _form_value(data: Mapping[str, Any]) -> str:
    """The text of a submitted form's one input (rows or labels, as Discord nests them)."""
    stack = list(data.get("components") or [])
    while stack:
        item = stack.pop(0)
        if not isinstance(item, Mapping):
            continue
        if item.get("custom_id") == "value" and isinstance(item.get("value"), str):
            return str(item["value"])
        stack.extend(item.get("components") or [])
        if isinstance(item.get("component"), Mapping):
            stack.append(item["component"])
    return ""
