"""Context assembly: token counting, budgets, tiering, rolling chat memory, prompt layout."""
