"""`gen new` writes byte for byte what plain cookiecutter writes for the same answers (file
modes included), across the option matrix: each framework, target and platform, with the
other options varied among them."""

from __future__ import annotations

import itertools
import stat
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

from generator.render import options
from generator.render.options import Options
from generator.render.project import render, template_dir

SAMPLES = [
    Options(f"same{i}", framework, target, platform, devices, nnodes, loop, chip)
    for i, ((framework, target, platform), devices, nnodes, loop, chip) in enumerate(
        zip(
            itertools.product(options.FRAMEWORKS, options.TARGETS, options.PLATFORMS),
            itertools.cycle(options.DEVICES_PER_NODE),
            itertools.cycle((1, 2, 3)),
            itertools.cycle(options.MS_TRAIN_LOOPS),
            itertools.cycle(options.CHIPS),
        )
    )
    # What the hook refuses is no project (16 NPUs a node on the first 910).
    if not (devices == 16 and chip in options.EIGHT_ONLY_CHIPS and target != "cuda")
]


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("answers", SAMPLES, ids=lambda o: "-".join(o.as_context().values()))
def test_gen_new_is_plain_cookiecutter(answers: Options, tmp_path: Path) -> None:
    ours = render(answers, tmp_path / "gen")
    theirs = Path(
        cookiecutter(
            str(template_dir()),
            no_input=True,
            extra_context=answers.as_context(),
            output_dir=str(tmp_path / "cookiecutter"),
        )
    )
    mine, plain = _tree(ours), _tree(theirs)
    assert mine.keys() == plain.keys()
    differ = [name for name in mine if mine[name] != plain[name]]
    assert not differ, differ
