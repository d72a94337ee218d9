"""``python -m crawlq``: the same as the ``crawlq`` command."""

from crawlq.cli import main

main()
