"""Context assembly: token counting, budgets, tiering, rolling chat memory, prompt layout."""

__all__ = ["DEFAULT_CONTEXT_TOKENS"]

#: Tokens of campaign text an answer's prompt holds when neither the chat, the campaign (``/gm
#: budget set``) nor the host (``LIMINALIS_CONTEXT_BUDGET_TOKENS``) says otherwise: room for a
#: handful of whole documents plus their neighbours, well inside every reply model's window,
#: at a cost per answer a small group does not notice. Every layer's default is this one name.
DEFAULT_CONTEXT_TOKENS = 6000
