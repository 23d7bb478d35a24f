"""``python -m sealeval`` runs the command line."""

from sealeval.cli import main

main()
