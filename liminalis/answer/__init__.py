"""The answer pipeline as a package: the pipeline (:class:`Responder`), the offline answerer and
citations. Adapters import from here."""

from liminalis.answer.citations import Answer, Source, bundle_sources, cited_sources
from liminalis.answer.offline import OfflineAnswerer
from liminalis.answer.pipeline import Responder

__all__ = ["Answer", "OfflineAnswerer", "Responder", "Source", "bundle_sources", "cited_sources"]
