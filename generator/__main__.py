"""Run the CLI as ``python -m generator``."""

from generator.cli import main

main()
