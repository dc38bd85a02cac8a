"""The knowledge layer: entities, summaries, motifs, sessions and an overview per lens.

Facts are extracted per document view and stored with that view's visibility
(:mod:`liminalis.store.knowledge`); every read aggregates only the views the caller's lens may
see (:func:`liminalis.lens.visible`). :class:`~liminalis.knowledge.service.Knowledge` is the
read API.
"""
