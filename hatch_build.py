"""Wheel build hook: the wheel carries the template's commit and its history
(generator/version.py reads both).

A wheel has no git history; without this, `gen --version` and the projects it makes
could not say which template made them, nor `gen update` which of two templates is newer.
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
            from generator.version import (
                COMMIT_FILE,
                HISTORY_FILE,
                template_commit,
                template_history,
            )
        finally:
            sys.path.pop(0)
        # From a checkout: git. From an sdist: the files this hook put there.
        commit = template_commit(root)
        if not commit:
            return
        wheel = self.target_name == "wheel"
        out = Path(tempfile.mkdtemp(prefix="train-template-build-"))
        (out / COMMIT_FILE).write_text(commit + "\n", encoding="utf-8")
        build_data["force_include"][str(out / COMMIT_FILE)] = (
            "generator/_template/" if wheel else ""
        ) + COMMIT_FILE
        history = template_history(root)
        if history:
            # In the package, not beside the template: the template's copy is the template.
            (out / HISTORY_FILE).write_text(history.strip() + "\n", encoding="utf-8")
            build_data["force_include"][str(out / HISTORY_FILE)] = (
                "generator/" if wheel else ""
            ) + HISTORY_FILE
