"""The one exception tree of Liminalis.

Every error a user can trigger derives from :class:`LiminalisError` and carries a
``user_message`` that is safe to show to any player: it never holds GM-only text, a file
system path, a secret or a stack trace. Details for operators live in attributes and in the
exception's ``str()``, which only reaches logs.

Tree::

    LiminalisError
    ├── ConfigError            bad settings or campaign.toml (startup; operator-facing)
    ├── UnknownCampaign        no such campaign, or the channel is not linked
    ├── InvalidInput           a malformed command, an empty question, a bad upload
    │   └── UploadRejected     a file that cannot be ingested (binary, too big, bad UTF-8)
    ├── PermissionDenied       a players-lens member tried a GM-only command
    ├── NotFound               a document key that does not exist *for this lens*
    ├── NotReady               the campaign has no index yet, or it is being rebuilt
    ├── ModelUnavailable       the language model timed out, was overloaded or refused, or its
    │                          reply broke (transport, protocol, decoding): with the partial text
    ├── SpendRefused           the router refused a model call before making it
    │   ├── BudgetSpent        the day's model tokens (or background's share of them) are spent
    │   ├── CreditsExhausted   the campaign's background credits are spent
    │   └── CampaignPaused     autonomous background work of the campaign is paused
    └── StoreError             the vector store or database failed (every sqlite3 error is
                               translated once, in liminalis/store/; one raised at open names
                               its cause: not a database, damaged, read-only, newer schema)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from liminalis.ports import Usage

__all__ = [
    "LiminalisError",
    "ConfigError",
    "UnknownCampaign",
    "InvalidInput",
    "UploadRejected",
    "PermissionDenied",
    "NotFound",
    "NotReady",
    "ModelUnavailable",
    "SpendRefused",
    "BudgetSpent",
    "CreditsExhausted",
    "CampaignPaused",
    "StoreError",
]


class LiminalisError(Exception):
    """Base of every error Liminalis raises on purpose.

    Args:
        detail: operator-facing description (logs only).
        user_message: text safe to show a player; defaults to the class's message.
    """

    default_user_message = "Something went wrong. Please try again."

    def __init__(self, detail: str = "", *, user_message: str | None = None) -> None:
        super().__init__(detail or self.default_user_message)
        self.detail = detail
        self.user_message = user_message or self.default_user_message


class ConfigError(LiminalisError):
    default_user_message = "The bot is misconfigured; ask the host to check its settings."


class UnknownCampaign(LiminalisError):
    default_user_message = (
        "This channel is not linked to a campaign. A GM can link it with `/campaign link <slug>`."
    )


class InvalidInput(LiminalisError):
    default_user_message = "I could not understand that request. Try `/help`."


class UploadRejected(InvalidInput):
    default_user_message = "That file cannot be ingested."


class PermissionDenied(LiminalisError):
    default_user_message = "Only a GM can do that."


class NotFound(LiminalisError):
    # Deliberately identical whether the thing is missing or merely hidden from the lens,
    # so an error never reveals that a GM-only document exists.
    default_user_message = "I could not find a document by that name."


class NotReady(LiminalisError):
    # Said instead of "I found nothing": an empty answer from an index that does not exist yet
    # (or is mid-rebuild after an embedder upgrade) would read as "the documents do not say".
    default_user_message = (
        "This campaign's documents are not indexed yet. Please try again in a minute."
    )


class ModelUnavailable(LiminalisError):
    """The model did not answer whole: busy, unreachable, timed out, or its reply broke (cut
    connection, a malformed event or body, an error event mid-stream).

    Args:
        partial: the text a stream had already delivered when it broke ("" when none).
        used: the tokens the call used by then, as far as the API said (``None``: unknown).
    """

    default_user_message = (
        "The answering model is busy or unreachable right now. Please try again in a minute."
    )

    def __init__(
        self,
        detail: str = "",
        *,
        user_message: str | None = None,
        partial: str = "",
        used: Usage | None = None,
    ) -> None:
        super().__init__(detail, user_message=user_message)
        self.partial = partial
        self.used = used


class SpendRefused(LiminalisError):
    """The router (:mod:`liminalis.routing.router`) refused a call before it reached the model:
    nothing was spent. ``campaign`` and ``role`` say which call."""

    default_user_message = "The language-model budget does not allow that right now."

    def __init__(
        self,
        detail: str = "",
        *,
        user_message: str | None = None,
        campaign: str = "",
        role: str = "",
    ) -> None:
        super().__init__(detail, user_message=user_message)
        self.campaign = campaign
        self.role = role


class BudgetSpent(SpendRefused):
    default_user_message = "Today's language-model budget is spent; it renews at midnight UTC."


class CreditsExhausted(SpendRefused):
    default_user_message = (
        "This campaign's background credits are spent; a GM can add more (`liminalis credits`)."
    )


class CampaignPaused(SpendRefused):
    default_user_message = "Background work for this campaign is paused."


class StoreError(LiminalisError):
    default_user_message = "The campaign index is unavailable right now. Please try again."
