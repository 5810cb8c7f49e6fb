"""What gen push and gen image push accept: remotes, credentials, registries."""

from __future__ import annotations

import pytest

from generator.errors import GenError, OptionError
from generator.image.push import registry_auth, registry_target
from generator.push.remote import Credentials, check_remote, credentials_from_env
from generator.render.options import Options

TOKEN = "0123456789abcdef" * 2 + "01234567"


def test_credentials_user_comes_from_url_then_env_then_oauth2() -> None:
    env = {"OPENI_TOKEN": TOKEN}
    assert credentials_from_env("https://h/u/r.git", environ={}) is None
    assert credentials_from_env("https://h/u/r.git", environ=env).user == "oauth2"
    with_user = {**env, "OPENI_USER": "alice"}
    assert credentials_from_env("https://h/u/r.git", environ=with_user).user == "alice"
    assert credentials_from_env("https://bob@h/u/r.git", environ=with_user).user == "bob"
    other = credentials_from_env("https://h/r.git", "MY_TOKEN", environ={"MY_TOKEN": TOKEN})
    assert other.env_name == "MY_TOKEN"
    assert TOKEN not in repr(other)


@pytest.mark.parametrize(
    "url",
    [
        "https://alice@openi.pcl.ac.cn/alice/r.git",
        "git@openi.pcl.ac.cn:alice/r.git",
        "git://127.0.0.1:9418/r.git",
        "/srv/git/r.git",
    ],
)
def test_clean_remotes_pass(url: str) -> None:
    assert check_remote(url, None) == url


@pytest.mark.parametrize(
    "url",
    [
        f"https://alice:{TOKEN}@openi.pcl.ac.cn/alice/r.git",
        f"https://{TOKEN}@openi.pcl.ac.cn/alice/r.git",
        "https://ghp_" + "a" * 36 + "@github.com/a/r.git",
        "https://alice:pw@host/r.git",
    ],
)
def test_remotes_with_credentials_are_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(OptionError) as err:
        check_remote(url, Credentials("oauth2", TOKEN))
    assert "put the token in $OPENI_TOKEN" in str(err.value)
    assert TOKEN not in str(err.value) and "pw@" not in str(err.value)


@pytest.mark.parametrize(
    ("registry", "local", "expected"),
    [
        ("127.0.0.1:5000/team", "My_Proj:cuda-abc", ("127.0.0.1:5000/team/my_proj", "cuda-abc")),
        ("swr.cn-north-4.myhuaweicloud.com/org/sub", "x:v1", None),
        ("localhost/team", "x", ("localhost/team/my_proj", "latest")),
        (
            "registry.example.com:443/a-b",
            "host:5000/x",
            ("registry.example.com:443/a-b/my_proj", "latest"),
        ),
    ],
)
def test_registry_target(registry: str, local: str, expected: tuple | None) -> None:
    repository, tag = registry_target(Options("My_Proj"), registry, local)
    assert repository == f"{registry}/my_proj"
    if expected:
        assert (repository, tag) == expected


@pytest.mark.parametrize(
    "registry",
    ["https://h.io/ns", "h.io", "team/ns", "u@h.io/ns", "h.io/NS", "h.io/ns/", "h.io:x/ns"],
)
def test_bad_registries(registry: str) -> None:
    with pytest.raises(OptionError, match="is not HOST"):
        registry_target(Options("p"), registry, "p:cuda-x")


def test_registry_auth_needs_both_or_neither() -> None:
    assert registry_auth({}) is None
    login = {"GEN_REGISTRY_USER": "u", "GEN_REGISTRY_PASSWORD": "p"}
    assert registry_auth(login) == {"username": "u", "password": "p"}
    with pytest.raises(GenError, match="set both GEN_REGISTRY_USER and GEN_REGISTRY_PASSWORD"):
        registry_auth({"GEN_REGISTRY_USER": "u"})
