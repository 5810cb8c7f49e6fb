"""The push scan: what it refuses by name, size and content, and what it lets through."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from generator.push import filescan
from tests.conftest import RenderProject

LIMIT = 100_000_000


@pytest.mark.parametrize(
    ("path", "why"),
    [
        (".env", "secret"),
        ("config/.env.production", "secret"),
        ("deploy/id_rsa", "secret"),
        ("certs/tls.key", "key or certificate"),
        ("service-account-prod.json", "credentials file"),
        ("output/ckpt/last.pt", "checkpoint or dataset (.pt)"),
        ("weights.safetensors", "checkpoint or dataset"),
        ("feats.npz", "checkpoint or dataset"),
        ("extra/train-images-idx3-ubyte.gz", "MNIST idx"),
        ("data/mnist/labels.csv", "under data/"),
        ("outputs/run1/metrics.jsonl", "under outputs/"),
        # What test/train_performance_1p.sh leaves, were it forced past the .gitignore.
        ("test/output/0/checkpoints/20260101-000000/metrics.jsonl", "under test/output/"),
    ],
)
def test_refused_by_name(path: str, why: str) -> None:
    reason = filescan.name_reason(path)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    "path",
    [
        "data/README.md",
        ".env.example",
        "src/model.py",
        "database/schema.sql",
        "id_rsa.pub",
        "test/train_performance_1p.sh",
        "tests/output/expected.txt",
    ],
)
def test_allowed_by_name(path: str) -> None:
    assert filescan.name_reason(path) is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("-----BEGIN RSA PRIVATE KEY-----\n", "private key block"),
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n", "private key block"),
        ("key = 'AKIA" + "Q" * 16 + "'\n", "AWS access key id"),
        ("aws_secret_access_key = " + "a/B+" * 10 + "\n", "AWS secret key"),
        ("token: ghp_" + "x" * 36 + "\n", "GitHub token"),
        ("github_pat_" + "A1_" * 10 + "\n", "GitHub token"),
        ("glpat-" + "z" * 20 + "\n", "GitLab token"),
        ("OPENI_TOKEN=" + "0123456789" * 4 + "\n", "Gitea-style access token"),
        (
            "pip install -i https://me:hunter2hunter2@pypi.example.com/simple x\n",
            "URL with a password",
        ),
    ],
)
def test_refused_by_content(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "f.txt").write_text(text)
    (finding,) = filescan.scan(tmp_path, ["f.txt"], max_bytes=LIMIT)
    assert finding.path == "f.txt" and why in finding.reason


@pytest.mark.parametrize(
    "text",
    [
        "commit 0123456789abcdef0123456789abcdef01234567\n",  # a commit id is not a token
        "https://user:<token>@openi.pcl.ac.cn/x.git\n",  # a placeholder
        "export OPENI_TOKEN=${OPENI_TOKEN}\n",
        "-----BEGIN PUBLIC KEY-----\n",
    ],
)
def test_allowed_content(tmp_path: Path, text: str) -> None:
    (tmp_path / "f.txt").write_text(text)
    assert filescan.scan(tmp_path, ["f.txt"], max_bytes=LIMIT) == []


def test_token_value_in_binary_and_across_chunks(tmp_path: Path) -> None:
    token = "s3cr3t-" + "9" * 20
    (tmp_path / "blob.bin").write_bytes(b"\0" * (filescan.CHUNK - 5) + token.encode())
    (finding,) = filescan.scan(tmp_path, ["blob.bin"], max_bytes=LIMIT, token=token)
    assert finding.reason == "holds the value of $OPENI_TOKEN"
    assert token not in finding.line()


def test_size_limit_uses_the_size_not_the_bytes(tmp_path: Path) -> None:
    with (tmp_path / "sparse.bin").open("wb") as sparse:
        sparse.truncate(3_000_000)
    (finding,) = filescan.scan(tmp_path, ["sparse.bin"], max_bytes=2_000_000)
    assert finding.reason == "is 3.0 MB, over the 2 MB limit (--max-file-mb)"
    assert filescan.scan(tmp_path, ["sparse.bin"], max_bytes=4_000_000) == []


@pytest.mark.parametrize(
    "options",
    [{"framework": "pytorch", "target": "both"}, {"framework": "mindspore", "target": "both"}],
)
def test_a_generated_project_passes(render_project: RenderProject, options: dict) -> None:
    project = render_project(**options)
    # What gen push would commit: git's view with the project's own .gitignore.
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--others", "--exclude-standard"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    paths = [p for p in listed if p]
    assert "train.py" in paths and not any(p.startswith("data/train") for p in paths)
    assert filescan.scan(project, paths, max_bytes=LIMIT) == []
