"""gen submit: hand a project's job to ModelArts (command.py: the job spec and the record)."""
