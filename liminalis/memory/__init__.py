"""ACT-R memory per campaign: activation, associations, spreading and the recall loop."""

from liminalis.memory.activation import DecayRates, EventLog, LeakyIntegrator, base_level
from liminalis.memory.associations import HebbianParams, LearnedEdge
from liminalis.memory.entities import NameEntities
from liminalis.memory.graph import Chunk, Graph, Link, build_graph
from liminalis.memory.recall import MemoryModel, MemoryParams, Recall
from liminalis.memory.spreading import SpreadParams, doc_scores, resonance, spread

__all__ = [
    "Chunk",
    "DecayRates",
    "EventLog",
    "Graph",
    "HebbianParams",
    "LeakyIntegrator",
    "LearnedEdge",
    "Link",
    "MemoryModel",
    "MemoryParams",
    "NameEntities",
    "Recall",
    "SpreadParams",
    "base_level",
    "build_graph",
    "doc_scores",
    "resonance",
    "spread",
]
