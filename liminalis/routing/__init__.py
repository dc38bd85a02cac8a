"""Routing: which model does each job, and the one gate every model call passes.

:mod:`~liminalis.routing.roles` assigns a model to each role; :mod:`~liminalis.routing.router`
admits, books, makes, settles and logs every call; :mod:`~liminalis.routing.report` reads the
log back as a campaign's spend by role, pass and node.
"""

from liminalis.routing.report import SpendReport
from liminalis.routing.roles import BACKGROUND_ROLES, FOREGROUND_ROLES, ROLES, RoleTable
from liminalis.routing.router import (
    Limits,
    RoutedModel,
    Router,
    Streamed,
    estimate_tokens,
    spend_report,
)

__all__ = [
    "BACKGROUND_ROLES",
    "FOREGROUND_ROLES",
    "ROLES",
    "Limits",
    "RoleTable",
    "RoutedModel",
    "Router",
    "SpendReport",
    "Streamed",
    "estimate_tokens",
    "spend_report",
]
