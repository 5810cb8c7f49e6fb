"""Run the CLI as ``python -m generator``."""

from generator.cli.main import main

main()
