"""``python -m masforge`` is the same as the ``masforge`` command."""

from masforge.cli import main

main()
