"""Wheel build hook: the wheel carries the template's commit (generator/version.py reads it).

A wheel has no git history; without this, `gen --version` and the projects it makes
could not say which template made them.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class TemplateCommitHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        root = Path(self.root)
        sys.path.insert(0, str(root))
        try:
            from generator.version import COMMIT_FILE, template_commit
        finally:
            sys.path.pop(0)
        # From a checkout: git. From an sdist: the file this hook put there.
        commit = template_commit(root)
        if not commit:
            return
        out = Path(tempfile.mkdtemp(prefix="train-template-build-")) / COMMIT_FILE
        out.write_text(commit + "\n", encoding="utf-8")
        where = "generator/_template/" if self.target_name == "wheel" else ""
        build_data["force_include"][str(out)] = where + COMMIT_FILE
