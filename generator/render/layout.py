"""Shape a freshly rendered project: keep the chosen framework's files, drop the rest.

Standard library only: the post-generation hook imports this module under
plain cookiecutter, and `gen new` calls it in-process.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from generator.render import pristine
from generator.render.options import FRAMEWORKS, Options

# A language model's project (task lm): its src/data.py and demo text (_lm/), its model and
# step (_lm_<framework>/), over the framework's; the digits and their sample images make way
# for the text and its sample prompts.
LM_OVERLAYS = ("_lm", *(f"_lm_{framework}" for framework in FRAMEWORKS))
DIGITS = ("data/train", "data/test", "samples")

# Files only an Ascend job uses; a cuda-only project does not carry them.
ASCEND_ONLY = (
    "rank_table_8p.json",
    "scripts/rank_table.py",
    "scripts/ranktable_model.py",
    "scripts/ranktable_node.py",
    "scripts/ranktable_rules.py",
    "scripts/run_ranktable.sh",
    # The ATC conversion of an exported model to the chip's offline model.
    "scripts/atc.py",
    "scripts/per_rank.sh",
    "Dockerfile.ascend",
    # Ascend ModelZoo's entry points: test/train_{full,performance}_{1p,8p}.sh.
    "test",
)
CUDA_ONLY = ("Dockerfile.cuda", "scripts/cuda_drivers.json")
# A MindSpore project carries the training loop it was generated with, not both,
# as src/scaffold/backend/train_loop.py.
MS_LOOP_FILES = {
    "model": "src/scaffold/backend/model_loop.py",
    "custom": "src/scaffold/backend/custom_loop.py",
}
MS_LOOP = "src/scaffold/backend/train_loop.py"
# Tests of one loop's own parts go with it.
MS_LOOP_TESTS = {"custom": "checks/test_custom_loop.py"}


def _move_over(overlay: Path, project_dir: Path) -> None:
    for source in sorted(overlay.rglob("*")):
        if source.is_file():
            dest = project_dir / source.relative_to(overlay)
            dest.parent.mkdir(parents=True, exist_ok=True)
            source.replace(dest)


def finalize(project_dir: Path, options: Options) -> None:
    """Move ``_<framework>/`` over the project root, remove the other overlays,
    drop target-specific files that do not apply, make the scripts executable and
    keep a copy of the result (generator/render/pristine.py)."""
    overlays = [f"_{options.framework}"]
    if options.task == "lm":
        for digits in DIGITS:
            shutil.rmtree(project_dir / digits)
        overlays += ["_lm", f"_lm_{options.framework}"]
    for overlay in overlays:
        _move_over(project_dir / overlay, project_dir)
    for name in (*(f"_{framework}" for framework in FRAMEWORKS), *LM_OVERLAYS):
        shutil.rmtree(project_dir / name, ignore_errors=True)
    # Kept without its dot in the template: a real .gitignore there would hide
    # the template's own files (the sample data) from this repo's git.
    gitignore = project_dir / "gitignore"
    if gitignore.is_file():
        gitignore.replace(project_dir / ".gitignore")
    if options.framework == "mindspore":
        for loop, name in MS_LOOP_FILES.items():
            if loop == options.ms_train_loop:
                (project_dir / name).replace(project_dir / MS_LOOP)
            else:
                (project_dir / name).unlink(missing_ok=True)
                if loop in MS_LOOP_TESTS:
                    (project_dir / MS_LOOP_TESTS[loop]).unlink(missing_ok=True)
    unused = {"cuda": ASCEND_ONLY, "ascend": CUDA_ONLY, "both": ()}[options.target]
    for name in unused:
        path = project_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    # Users run ./scripts/run_1p.sh as often as bash scripts/run_1p.sh.
    scripts = [*project_dir.glob("scripts/*.sh"), *project_dir.glob("test/*.sh")]
    for script in [*scripts, project_dir / "env.sh"]:
        if script.is_file():
            script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    # pip compiles the installed template's modules; their bytecode is no project's.
    for cache in sorted(project_dir.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache)
    # What `gen update` merges from: this render, as it was made.
    pristine.save(project_dir)
