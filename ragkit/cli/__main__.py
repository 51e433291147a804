"""`python -m ragkit.cli`: the same command line as `rag`."""

from ragkit.cli import main

main()
