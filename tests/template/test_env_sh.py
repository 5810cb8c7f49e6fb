"""env.sh, sourced from sh (dash), bash and zsh: the caller's values and strict mode survive,
CANN's set_env.sh is found and its failures contained, and the HCCL and torch_npu settings
are there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import RenderProject
from tests.template.launchers import env

SHELLS = ("sh", "bash", "zsh")
# What each shell prints for `set -o` flags we check: strict mode on, then the values.
SHOW = '. ./env.sh; case $- in *e*u* | *u*e*) echo strict ;; *) echo lax ;; esac; echo "VALUES"'


def source(project: Path, shell: str, code: str, **extra: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which(shell)
    assert binary, f"{shell} is not installed (tools/test.sh installs it)"
    # zsh reads `sh`-style scripts as sh does only in sh emulation, as `. ./env.sh` in a zsh
    # login would not be: run it as zsh itself.
    return subprocess.run(
        [binary, "-c", code],
        cwd=project,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_sourcing_keeps_strict_mode_and_sets_the_variables(
    render_project: RenderProject, tmp_path: Path, shell: str
) -> None:
    project = render_project(target="both")
    values = "$NCCL_DEBUG $HCCL_CONNECT_TIMEOUT $HCCL_EXEC_TIMEOUT"
    values += " $HCCL_WHITELIST_DISABLE $TASK_QUEUE_ENABLE"
    code = "set -eu; " + SHOW.replace("VALUES", values)
    result = source(project, shell, code, ASCEND_HOME=str(tmp_path / "nothing"))
    assert result.returncode == 0, result.stderr
    strict, line = result.stdout.splitlines()
    assert strict == "strict", "the caller's strict mode stays"
    nccl, connect, execute, whitelist, queue = line.split()
    assert nccl == "WARN" and whitelist == "1" and queue == "1"
    assert 120 <= int(connect) <= 7200 and 0 <= int(execute) <= 17340
    assert f"no CANN found under ASCEND_HOME={tmp_path}/nothing" in result.stderr
    assert "not found" not in result.stderr.replace("no CANN found", ""), result.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_the_callers_values_and_lax_mode_are_kept(
    render_project: RenderProject, shell: str
) -> None:
    project = render_project(target="both")
    code = SHOW.replace("VALUES", "$NCCL_DEBUG $HCCL_EXEC_TIMEOUT $TASK_QUEUE_ENABLE")
    result = source(
        project, shell, code, NCCL_DEBUG="INFO", HCCL_EXEC_TIMEOUT="612", TASK_QUEUE_ENABLE="2"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["lax", "INFO", "612", "2"]


def _fake_cann(root: Path, package: str, marker: str) -> Path:
    # Like CANN's own: reads an unset variable and ends in a failing command.
    script = root / package / "set_env.sh"
    script.parent.mkdir(parents=True)
    script.write_text(
        f'export CANN_MARKER={marker}\necho "$SURELY_UNSET_VARIABLE" >/dev/null\nfalse\n'
    )
    return root


@pytest.mark.parametrize("shell", SHELLS)
def test_cann_is_sourced_under_strict_mode_without_killing_the_caller(
    render_project: RenderProject, tmp_path: Path, shell: str
) -> None:
    project = render_project(target="ascend")
    home = _fake_cann(tmp_path / "Ascend", "ascend-toolkit", "toolkit")
    _fake_cann(home, "nnae", "nnae")
    code = "set -eu; " + SHOW.replace("VALUES", "$CANN_MARKER")
    result = source(project, shell, code, ASCEND_HOME=str(home))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["strict", "toolkit"]
    assert "no CANN found" not in result.stderr


def test_the_install_info_names_cann(render_project: RenderProject, tmp_path: Path) -> None:
    project = render_project(target="ascend")
    home = _fake_cann(tmp_path / "cann root", "nnae", "nnae")
    info = tmp_path / "ascend_cann_install.info"
    info.write_text(f"Install_Path={home}\n")
    code = '. ./env.sh; echo "$CANN_MARKER|$ASCEND_HOME"'
    result = source(project, "sh", code, ASCEND_INSTALL_INFO=str(info))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"nnae|{home}"


def test_env_sh_carries_only_the_target_sections(render_project: RenderProject) -> None:
    cuda = (render_project("c", target="cuda") / "env.sh").read_text()
    ascend = (render_project("a", target="ascend", framework="mindspore") / "env.sh").read_text()
    assert "NCCL_DEBUG:=WARN" in cuda and "HCCL" not in cuda
    assert "HCCL_CONNECT_TIMEOUT" in ascend and "NCCL" not in ascend
    assert "TASK_QUEUE_ENABLE" not in ascend, "torch_npu's setting is for PyTorch projects"


def test_env_sh_refuses_to_run(render_project: RenderProject) -> None:
    project = render_project(target="cuda")
    result = subprocess.run(["sh", str(project / "env.sh")], capture_output=True, text=True)
    assert result.returncode == 2
    assert "source this file" in result.stderr
