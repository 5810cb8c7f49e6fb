"""gen update: bring a project to a newer template, as a three-way merge (command.py)."""
