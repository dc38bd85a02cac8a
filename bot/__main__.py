"""``python -m bot`` starts whichever platforms have tokens (same as ``liminalis serve``)."""

import sys

from bot.cli import main

sys.exit(main(["serve", *sys.argv[1:]]))
