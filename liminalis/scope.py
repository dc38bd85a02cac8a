"""A request's campaign scope: the campaign's config, its catalog snapshot and the asker's lens,
resolved once per request and handed down.

Why one object: a question used to load the campaign's config in four places and resolve the
lens twice; two reads of the config could disagree after a GM's edit between them, and two
catalog snapshots could straddle an ingest (a document visible at retrieval, gone at the
prompt). Everything one request reads comes from the one scope.
"""

from __future__ import annotations

from dataclasses import dataclass

from liminalis.campaign import CampaignConfig
from liminalis.lens import Lens
from liminalis.retrieval.catalog import Catalog

__all__ = ["CampaignScope"]


@dataclass(frozen=True, slots=True)
class CampaignScope:
    """One request's campaign (config and catalog snapshot) and the lens it reads through."""

    config: CampaignConfig
    catalog: Catalog
    lens: Lens

    @property
    def slug(self) -> str:
        return self.config.slug
