"""`gen push` against real git servers on 127.0.0.1: smart HTTP with a token, git daemon."""

from __future__ import annotations

import hashlib
import os
import subprocess
import zlib
from pathlib import Path

import pytest

from generator.render.options import Options
from generator.render.project import render
from tests.conftest import gen
from tests.integration.conftest import GitServers

IDENTITY = {
    "GIT_AUTHOR_NAME": "Push Test",
    "GIT_AUTHOR_EMAIL": "push@example.com",
    "GIT_COMMITTER_NAME": "Push Test",
    "GIT_COMMITTER_EMAIL": "push@example.com",
}


def _project(tmp_path: Path, name: str = "pushtest") -> Path:
    return render(Options(name), tmp_path / "work")


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **IDENTITY},
    )
    return result.stdout.strip()


def _snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file and link under ``root`` (.git included): mode and content hash."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(root))] = (0, os.readlink(path))
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = (path.stat().st_mode, digest)
    return found


def _assert_nowhere(secret: str, *places: Path | str) -> None:
    """``secret`` is in no file under the given folders (git objects inflated) nor text."""
    needle = secret.encode()
    for place in places:
        if isinstance(place, str):
            assert secret not in place
            continue
        for path in place.rglob("*"):
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
            assert needle not in data, path
            if path.parent.parent.name == "objects" and len(path.parent.name) == 2:
                assert needle not in zlib.decompress(data), path


def _clone(bare: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(bare), str(dest)], check=True)
    return dest


def _push(
    project: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return gen("push", *args, cwd=project, env={**IDENTITY, **(env or {})})


def test_push_over_http_with_a_token(
    tmp_path: Path, git_servers: GitServers, isolated_home: Path
) -> None:
    project = _project(tmp_path)
    bare = git_servers.bare("team/pushtest.git")
    url = git_servers.http.url("team/pushtest.git")
    seen: list[str] = []

    def push(*args: str) -> subprocess.CompletedProcess[str]:
        result = _push(project, *args, env={"OPENI_TOKEN": git_servers.token})
        seen.append(result.stdout + result.stderr)
        return result

    # A helper that stores what it is given: with a token, git must not consult it.
    _git(isolated_home, "config", "--global", "credential.helper", "store")

    before = _snapshot(project)
    result = push("--remote", url, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"would create a git repository in {project}" in result.stdout
    assert "  A train.py" in result.stdout and "  A data/README.md" in result.stdout
    assert f"would push to {url} (branch main)" in result.stdout
    assert _snapshot(project) == before and not (project / ".git").exists()

    result = push("--remote", url, "--message", "first push")
    assert result.returncode == 0, result.stderr
    assert f"to {url} (branch main)" in result.stdout
    assert f"recorded {url} as origin" in result.stdout
    # The neutral user name Gitea accepts with a token.
    assert set(git_servers.http.seen_users) == {"oauth2"}
    clone = _clone(bare, tmp_path / "clone1")
    assert _git(clone, "log", "--format=%s") == "first push"
    assert _git(clone, "rev-parse", "HEAD^{tree}") == _git(project, "rev-parse", "HEAD^{tree}")
    for name in _git(clone, "ls-files").splitlines():
        assert (clone / name).read_bytes() == (project / name).read_bytes(), name
    assert not (clone / "data" / "train").exists()  # the sample data stays local
    assert _git(project, "remote", "get-url", "origin") == url
    assert _git(project, "status", "--porcelain") == ""
    assert _git(project, "rev-parse", "origin/main") == _git(project, "rev-parse", "HEAD")

    # Changes since the last push: one modified, one added, one deleted; origin by default.
    (project / "train.py").write_text((project / "train.py").read_text() + "\n# tuned\n")
    (project / "NOTES.md").write_text("notes\n")
    (project / "checks" / "test_record.py").unlink()
    before = _snapshot(project)
    result = push("--dry-run")
    assert result.returncode == 0, result.stderr
    assert "would commit 3 change(s) on top of " in result.stdout
    for line in ("  M train.py", "  A NOTES.md", "  D checks/test_record.py"):
        assert line in result.stdout
    assert _snapshot(project) == before

    result = push()
    assert result.returncode == 0, result.stderr
    assert "(3 change(s))" in result.stdout
    clone = _clone(bare, tmp_path / "clone2")
    assert _git(clone, "log", "--format=%s").splitlines()[0].startswith("gen push: ")
    assert (clone / "train.py").read_text().endswith("# tuned\n")
    assert not (clone / "checks" / "test_record.py").exists()

    result = push()
    assert result.returncode == 0, result.stderr
    assert "nothing changed since the last commit" in result.stdout

    assert not (isolated_home / ".git-credentials").exists()  # the store helper was off
    _assert_nowhere(git_servers.token, project, isolated_home, tmp_path / "clone2", *seen)
    assert "token" not in _git(project, "config", "--list").lower()


def test_token_and_server_failures(
    tmp_path: Path, git_servers: GitServers, isolated_home: Path
) -> None:
    project = _project(tmp_path)
    git_servers.bare("team/pushtest.git")
    url = git_servers.http.url("team/pushtest.git")
    before = _snapshot(project)

    wrong = "f" * 40
    result = _push(project, "--remote", url, env={"OPENI_TOKEN": wrong})
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {url} refused the token in $OPENI_TOKEN")
    assert wrong not in result.stdout + result.stderr
    assert _snapshot(project) == before  # the .git gen made is gone again

    result = _push(project, "--remote", url, "--token-env", "MY_TOKEN")
    assert result.returncode == 1
    assert f"error: {url} refused to let you in without credentials" in result.stderr
    assert "put an access token in $MY_TOKEN" in result.stderr
    assert _snapshot(project) == before

    token = {"OPENI_TOKEN": git_servers.token}
    result = _push(project, "--remote", git_servers.http.url("team/nosuch.git"), env=token)
    assert result.returncode == 1
    assert "has no such repository: create it on the platform first" in result.stderr
    assert _snapshot(project) == before

    leaked = url.replace("http://", f"http://someone:{git_servers.token}@")
    result = _push(project, "--remote", leaked, env=token)
    assert result.returncode == 2
    assert "put the token in $OPENI_TOKEN" in result.stderr
    assert git_servers.token not in result.stdout + result.stderr

    git_servers.http.stop()
    result = _push(project, "--remote", url, env=token)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {url} does not answer")
    assert _snapshot(project) == before
    _assert_nowhere(git_servers.token, project, isolated_home)


def test_credential_helper_without_a_token(
    tmp_path: Path, git_servers: GitServers, isolated_home: Path
) -> None:
    project = _project(tmp_path)
    bare = git_servers.bare("team/pushtest.git")
    url = git_servers.http.url("team/pushtest.git")
    store = isolated_home / ".git-credentials"
    store.write_text(f"http://alice:{git_servers.token}@127.0.0.1:{git_servers.http.port}\n")
    _git(isolated_home, "config", "--global", "credential.helper", f"store --file={store}")

    result = _push(project, "--remote", url)
    assert result.returncode == 0, result.stderr
    assert git_servers.http.seen_users[-1] == "alice"
    assert _clone(bare, tmp_path / "clone").joinpath("train.py").is_file()


def test_diverged_remote_then_recovery(tmp_path: Path, git_servers: GitServers) -> None:
    project = _project(tmp_path)
    bare = git_servers.bare("pushtest.git")
    url = git_servers.daemon.url("pushtest.git")
    assert _push(project, "--remote", url).returncode == 0

    # Someone else pushes first.
    other = _clone(bare, tmp_path / "other")
    (other / "CONTRIBUTING.md").write_text("be nice\n")
    _git(other, "add", "-A")
    _git(other, "commit", "-qm", "from elsewhere")
    _git(other, "push", "-q", "origin", "main")

    (project / "train.py").write_text((project / "train.py").read_text() + "# mine\n")
    before = _snapshot(project)
    result = _push(project)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: main on {url} has commits this project lacks")
    assert f"git pull {url} main" in result.stderr
    assert _snapshot(project) == before

    _git(project, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    result = _push(project)
    assert result.returncode == 0, result.stderr
    clone = _clone(bare, tmp_path / "clone")
    assert (clone / "CONTRIBUTING.md").is_file()
    assert (clone / "train.py").read_text().endswith("# mine\n")

    result = _push(project, "--remote", git_servers.daemon.url("nosuch.git"))
    assert result.returncode == 1 and "has no such repository" in result.stderr
    git_servers.daemon.stop()
    result = _push(project)
    assert result.returncode == 1 and f"error: {url} does not answer" in result.stderr


def test_unsafe_files_are_refused_one_line_each(tmp_path: Path) -> None:
    project = _project(tmp_path)
    token = "9c1e" * 10
    planted = {
        "deploy/id_ed25519": "key",
        ".env.production": "DB_PASSWORD=x\n",
        "gcp-credentials.json": "{}",
        "certs/server.pem": "cert",
        "src/keys.txt": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n",
        "src/settings.py": 'HUB = "ghp_' + "a1B2" * 9 + '"\n',
        "scripts/aws.sh": "export AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP\n",
        "env.local.sh": f"export OPENI_TOKEN={'ab12' * 10}\n",
        "pip.conf": "index-url = https://bob:s3cretpass@pypi.example.com/simple\n",
        "NOTES.md": f"my token is {token}\n",
        "model.safetensors": "x",
        "weights.h5": "x",
        "samples/t10k-labels-idx1-ubyte.gz": "x",
        "test/output/0/metrics.jsonl": "{}\n",  # what test/train_performance_1p.sh leaves
    }
    for name, text in planted.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    with (project / "big.bin").open("wb") as big:
        big.truncate(150_000_000)  # sparse: no disk used
    before = _snapshot(project)

    result = _push(project, "--remote", "http://127.0.0.1:9/x.git", env={"OPENI_TOKEN": token})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    errors = {line.split(": ", 2)[1]: line for line in lines if line.startswith("error: ")}
    # The generated .gitignore keeps these out of any commit: nothing to refuse.
    ignored = {
        ".env.production",
        "certs/server.pem",
        "deploy/id_ed25519",
        "model.safetensors",
        "weights.h5",
        "samples/t10k-labels-idx1-ubyte.gz",
        "test/output/0/metrics.jsonl",
    }
    assert set(errors) == {*planted, "big.bin"} - ignored, lines
    assert "is 150.0 MB, over the 100 MB limit" in errors["big.bin"]
    assert "holds the value of $OPENI_TOKEN" in errors["NOTES.md"]
    assert "private key block" in errors["src/keys.txt"]
    assert "GitHub token" in errors["src/settings.py"]
    assert "AWS access key id" in errors["scripts/aws.sh"]
    assert "Gitea-style access token" in errors["env.local.sh"]
    assert "URL with a password" in errors["pip.conf"]
    assert lines[-1].startswith("nothing was committed or pushed")
    assert token not in result.stdout + result.stderr
    assert _snapshot(project) == before

    result = _push(project, "--remote", "http://127.0.0.1:9/x.git", "--max-file-mb", "200")
    assert result.returncode == 1 and "big.bin" not in result.stderr

    # In a repository: what is force-added past the .gitignore would be committed, so it counts.
    for name in [*(set(planted) - ignored), "big.bin"]:
        (project / name).unlink()
    _git(project, "init", "-q")
    (project / "data" / "labels.csv").write_text("1,2\n")
    _git(project, "add", "-A")
    _git(
        project,
        "add",
        "-f",
        "data/labels.csv",
        "model.safetensors",
        "samples/t10k-labels-idx1-ubyte.gz",
        "test/output/0/metrics.jsonl",
    )
    _git(project, "commit", "-qm", "mine")
    before = _snapshot(project)
    result = _push(project, "--remote", "http://127.0.0.1:9/x.git")
    assert result.returncode == 1
    errors = {
        line.split(": ", 2)[1]: line
        for line in result.stderr.splitlines()
        if line.startswith("error: ")
    }
    assert "is under data/" in errors["data/labels.csv"]
    assert "checkpoint or dataset (.safetensors)" in errors["model.safetensors"]
    assert "MNIST idx" in errors["samples/t10k-labels-idx1-ubyte.gz"]
    assert "is under test/output/" in errors["test/output/0/metrics.jsonl"]
    assert _snapshot(project) == before


def test_identity_and_remote_are_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path)
    for name in [*IDENTITY, "EMAIL"]:
        monkeypatch.delenv(name, raising=False)
    result = gen("push", "--remote", "http://127.0.0.1:9/x.git", cwd=project)
    assert result.returncode == 1
    assert "error: git does not know who you are: run git config --global" in result.stderr
    assert not (project / ".git").exists()

    result = _push(project)
    assert result.returncode == 2 and "the project has no origin yet" in result.stderr
    result = _push(project, "--remote", "http://127.0.0.1:9/x.git", "--branch", "a..b")
    assert result.returncode == 2 and "not a valid branch name" in result.stderr
    result = gen("push", "--remote", "x", cwd=tmp_path)
    assert result.returncode == 1 and "not a project generated by train-template" in result.stderr
