"""Option validation: what is allowed, and the one line said about what is not."""

from __future__ import annotations

import pytest

from generator.errors import OptionError
from generator.render.options import Options, validate

GOOD = {
    "project": "mnist-lenet",
    "framework": "pytorch",
    "target": "ascend",
    "platform": "modelarts",
    "devices_per_node": "4",
    "nnodes": "2",
}


def test_valid_values_are_typed() -> None:
    options = validate(GOOD)
    assert options == Options("mnist-lenet", "pytorch", "ascend", "modelarts", 4, 2)
    assert options.as_context()["devices_per_node"] == "4"
    assert options.ms_train_loop == "model"


def test_mindspore_with_custom_loop() -> None:
    options = validate({**GOOD, "framework": "mindspore", "ms_train_loop": "custom"})
    assert (options.framework, options.ms_train_loop) == ("mindspore", "custom")


def test_private_keys_are_ignored() -> None:
    assert validate({**GOOD, "_template": "x", "__data_url": "/dataset"}).project == "mnist-lenet"


@pytest.mark.parametrize(
    "project",
    [
        "",
        "a b",
        "it's",
        '"q"',
        "$(touch x)",
        "`id`",
        "../up",
        "a/b",
        "-rf",
        "名字",
        "1st",
        "x" * 65,
        "tab\tname",
        "new\nline",
    ],
)
def test_bad_project_names(project: str) -> None:
    with pytest.raises(OptionError) as err:
        validate({**GOOD, "project": project})
    message = str(err.value)
    assert message.startswith("project: ")
    assert "letters, digits" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("framework", "tensorflow", "pytorch, mindspore"),
        ("ms_train_loop", "keras", "model, custom"),
        ("target", "rocm", "cuda, ascend, both"),
        ("platform", "colab", "openi, modelarts, generic"),
        ("devices_per_node", "0", "1, 2, 4, 8, 16"),
        ("devices_per_node", "3", "1, 2, 4, 8, 16"),
        ("devices_per_node", "32", "1, 2, 4, 8, 16"),
        ("devices_per_node", "eight", "1, 2, 4, 8, 16 (or auto)"),
        ("nnodes", "0", "1 to 1024"),
        ("nnodes", "-1", "1 to 1024"),
        ("nnodes", "1.5", "1 to 1024"),
        ("nnodes", "2000", "1 to 1024"),
    ],
)
def test_bad_choices_name_what_is_allowed(key: str, value: str, allowed: str) -> None:
    with pytest.raises(OptionError) as err:
        validate({**GOOD, key: value})
    assert str(err.value).startswith(f"{key}: ")
    assert allowed in str(err.value)
    assert err.value.option == key


def test_option_error_exit_code_is_usage() -> None:
    assert OptionError("x", "y").exit_code == 2


@pytest.mark.parametrize(
    ("target", "chip", "devices"),
    [
        ("ascend", "910_93", 16),  # Atlas A3: super-pod jobs take a node's 16
        ("both", "910_93", 16),
        ("cuda", "910_93", 8),  # the chip is an Ascend answer: a CUDA project ignores it
        ("ascend", "910b", 8),
        ("ascend", "910", 8),
    ],
)
def test_devices_per_node_auto_and_unsaid_follow_the_chip(
    target: str, chip: str, devices: int
) -> None:
    values = {**GOOD, "target": target, "chip": chip}
    assert validate({**values, "devices_per_node": "auto"}).devices_per_node == devices
    del values["devices_per_node"]
    assert validate(values).devices_per_node == devices


@pytest.mark.parametrize(
    ("target", "chip"), [("cuda", "910b"), ("ascend", "910b"), ("ascend", "910_93")]
)
def test_sixteen_devices_where_the_nodes_hold_sixteen(target: str, chip: str) -> None:
    options = validate({**GOOD, "target": target, "chip": chip, "devices_per_node": "16"})
    assert options.devices_per_node == 16


@pytest.mark.parametrize("target", ["ascend", "both"])
def test_sixteen_devices_on_the_first_910_is_one_line(target: str) -> None:
    with pytest.raises(OptionError) as err:
        validate({**GOOD, "target": target, "chip": "910", "devices_per_node": "16"})
    assert str(err.value) == (
        "devices_per_node: 16 is not allowed for chip 910: an Atlas training server (Ascend "
        "910) holds 8 NPUs; choose one of 1, 2, 4, 8 (or auto)"
    )
