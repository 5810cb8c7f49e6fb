"""Options: code defaults < config.yaml < flags; the platforms' arguments are accepted and
named; a mistyped flag or key and a bad value fail in one line naming what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from src.scaffold.backend import ProjectConfig
from src.scaffold.config import DEFAULT_CONFIG, Config, ConfigError, env_first, parse_config
from src.scaffold.config.platform_args import PLATFORM_ARGS


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_config_parses() -> None:
    cfg = parse_config([], ProjectConfig)
    assert cfg.config_path == DEFAULT_CONFIG
    assert cfg.epoch_size >= 1 and cfg.batch_size >= 1 and cfg.lr > 0
    # Three checkpoints besides the best: enough to resume from, bounded on disk.
    assert cfg.keep_checkpoints == Config().keep_checkpoints == 3


def test_yaml_overrides_defaults_and_flags_override_yaml(tmp_path: Path) -> None:
    path = write_config(tmp_path, "lr: 1e-3\nbatch_size: 16\nepoch_size: 3\ndata_url: /dataset\n")
    cfg = parse_config(["--config_path", str(path), "--batch_size", "8"])
    assert cfg.lr == 0.001  # PyYAML reads 1e-3 as a string: converted like the flag
    assert cfg.batch_size == 8
    assert cfg.epoch_size == 3
    assert cfg.data_url == Path("/dataset")
    assert cfg.momentum == Config().momentum  # not in the file: the code default


def test_model_args_are_name_value_pairs_from_yaml_or_the_flag(tmp_path: Path) -> None:
    path = write_config(tmp_path, "model_args:\n  width: 32\n  act: gelu\n  tied: true\n")
    cfg = parse_config(["--config_path", str(path)])
    assert cfg.model_args == {"width": 32, "act": "gelu", "tied": True}
    cfg = parse_config(["--config_path", str(path), "--model_args", "width=64,dropout=0.1"])
    assert cfg.model_args == {"width": 64, "dropout": 0.1}  # the flag replaces them all
    assert Config().model_args == {} and Config().model_args is not Config().model_args


def test_relative_paths_in_yaml_are_relative_to_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, "data_url: ./data\ntrain_url: out\n")
    cfg = parse_config(["--config_path", str(path), "--dataset_name", "mnist"])
    assert cfg.data_url == tmp_path / "data"
    assert cfg.dataset_name == "mnist"
    assert cfg.train_url == tmp_path / "out"
    flagged = parse_config(["--config_path", str(path), "--train_url", "rel"])
    assert flagged.train_url == Path("rel")  # a flag is relative to the working directory


def test_platform_arguments_are_kept_by_name(tmp_path: Path) -> None:
    path = write_config(tmp_path, "")
    argv = ["--config_path", str(path), "--multi_data_url", "[{}]", "--init_method=tcp://1:2"]
    cfg = parse_config([*argv, "--ckpt_url", "/ckpt", "--epoch_size", "2", "--ckpt_url", "x"])
    assert cfg.epoch_size == 2
    # Names only, once each: values may hold credentials or long URLs.
    assert cfg.ignored_args == ("--multi_data_url", "--init_method", "--ckpt_url")


@pytest.mark.parametrize("name", sorted(PLATFORM_ARGS))
def test_each_platform_argument_is_accepted_in_every_form(tmp_path: Path, name: str) -> None:
    path = write_config(tmp_path, "")
    flag = f"--{name}"
    # --x=v, --x v, a value like a negative number, and --x alone at the end.
    argv = [f"{flag}=obs://b/x", "--epoch_size", "2", flag, "[{}]", flag, "-1", flag]
    cfg = parse_config(["--config_path", str(path), *argv])
    assert cfg.ignored_args == (flag,)
    assert cfg.epoch_size == 2


def test_no_abbreviations(tmp_path: Path) -> None:
    # A platform's --data must not be taken for --data_url, nor pass unnoticed.
    with pytest.raises(ConfigError, match=r"unknown option --data \(did you mean --data_url\?\)"):
        parse_config(["--config_path", str(write_config(tmp_path, "")), "--data", "/x"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--epochs", "0"], "unknown option --epochs (did you mean --epoch_size?)"),
        (["--learning_rate", "0.5"], "unknown option --learning_rate (did you mean --lr?)"),
        (["--bs", "8"], "unknown option --bs (did you mean --batch_size?)"),
        (["--lr=abc"], "argument --lr: 'abc' is not a number"),
        (["--epoch", "3"], "unknown option --epoch (did you mean --epoch_size?)"),
        (["--batch-size", "8"], "unknown option --batch-size (did you mean --batch_size?)"),
        (["--traindat", "/d"], "unknown option --traindat (did you mean --traindata?)"),
        (["--smoek"], "unknown option --smoek (did you mean --smoke?)"),
        (["--qqqzzz"], "unknown option --qqqzzz (see --help)"),
        (["3"], "unexpected argument '3' (options are --name value; see --help)"),
        (["epochs=3"], "unexpected argument 'epochs=3' (did you mean --epoch_size=3?)"),
        # A platform argument takes one value at most: a second word is a stray.
        (["--ckpt_url", "/a", "/b"], "unexpected argument '/b'"),
        # Only the arguments in the table pass, and only spelt as the platforms spell them.
        (["--multi_data_url", "[{}]", "--multi-data-url", "x"], "unknown option --multi-data-url"),
    ],
)
def test_a_mistyped_argument_is_one_line_naming_the_closest_flag(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(["--config_path", str(write_config(tmp_path, "")), *argv])
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_seed_samples_data_flags_are_aliases(tmp_path: Path) -> None:
    path = write_config(tmp_path, "")
    cfg = parse_config(["--config_path", str(path), "--traindata", "/d/train", "--testdata=/d/t"])
    assert (cfg.train_dir, cfg.test_dir) == (Path("/d/train"), Path("/d/t"))
    assert cfg.ignored_args == ()


def test_flags_given_are_known_apart_from_yaml(tmp_path: Path) -> None:
    path = write_config(tmp_path, "data_url: /yaml\n")
    cfg = parse_config(["--config_path", str(path), "--train_url", "/out", "--lr", "0.1"])
    assert set(cfg.given) == {"config_path", "train_url", "lr"}
    assert "given" not in cfg.hparams() and "ignored_args" not in cfg.hparams()


def test_resume_auto_skip_layers_and_amp(tmp_path: Path) -> None:
    text = "skip_layers: [classifier.4, fc3]\npretrained: w.pt\nresume: auto\namp: 'true'\n"
    cfg = parse_config(["--config_path", str(write_config(tmp_path, text))])
    assert (cfg.resume, cfg.skip_layers, cfg.amp) == ("auto", ("classifier.4", "fc3"), "true")
    argv = ["--config_path", str(tmp_path / "config.yaml"), "--resume", "x.pt"]
    flagged = parse_config([*argv, "--skip_layers", "a,b"])
    assert (flagged.resume, flagged.skip_layers) == (Path("x.pt"), ("a", "b"))
    assert flagged.hparams()["skip_layers"] == ["a", "b"]


def test_skip_layers_without_pretrained_weights_is_refused(tmp_path: Path) -> None:
    path = write_config(tmp_path, "")
    with pytest.raises(ConfigError, match="^--skip_layers applies to the weights --pretrained"):
        parse_config(["--config_path", str(path), "--skip_layers", "fc3"])


@pytest.mark.parametrize(("given", "target"), [("Ascend", "npu"), ("GPU", "cuda"), ("cpu", "cpu")])
def test_device_target_names(tmp_path: Path, given: str, target: str) -> None:
    path = write_config(tmp_path, "")
    assert parse_config(["--config_path", str(path), "--device_target", given]).device_target == (
        target
    )


def test_smoke_trains_one_epoch_unless_told(tmp_path: Path) -> None:
    path = write_config(tmp_path, "epoch_size: 10\n")
    assert parse_config(["--config_path", str(path), "--smoke"]).epoch_size == 1
    argv = ["--config_path", str(path), "--smoke", "--epoch_size", "2"]
    assert parse_config(argv).epoch_size == 2


@pytest.mark.parametrize(
    ("yaml_text", "argv", "message"),
    [
        ("", ["--device_target", "tpu"], "unknown device target 'tpu'"),
        ("", ["--batch_size", "0"], "--batch_size: 0 must be at least 1"),
        ("", ["--lr", "fast"], "--lr: 'fast' is not a number"),
        ("", ["--momentum", "1"], "--momentum: 1 must be in"),
        ("", ["--val_fraction", "1"], "--val_fraction: 1 must be in"),
        ("", ["--amp", "maybe"], "--amp: 'maybe' is not one of auto, true, false"),
        ("", ["--keep_checkpoints", "0"], "--keep_checkpoints: 0 must be at least 1"),
        ("", ["--model_args", "width"], "--model_args: 'width' is not name=value"),
        ("epochs: 3\n", [], "unknown option 'epochs' (did you mean 'epoch_size'?)"),
        ("learning_rate: 0.1\n", [], "unknown option 'learning_rate' (did you mean 'lr'?)"),
        ("data:\n  fromat: csv\n", [], "option 'data.fromat' (did you mean 'data.format'?)"),
        ("scheduler: cosine\n", [], "'scheduler' (did you mean 'schedule.name'?)"),
        ("qqqzzz: 1\n", [], "unknown option 'qqqzzz' (known: data_url, train_url,"),
        ("batch_size: many\n", [], "batch_size: 'many' is not a whole number"),
        ("- a list\n", [], "must hold a mapping"),
        ("lr: [1\n", [], "not valid YAML"),
    ],
)
def test_bad_values_raise_config_error(
    tmp_path: Path, yaml_text: str, argv: list[str], message: str
) -> None:
    path = write_config(tmp_path, yaml_text)
    with pytest.raises(ConfigError) as caught:
        parse_config(["--config_path", str(path), *argv])
    assert message in str(caught.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        parse_config(["--config_path", str(tmp_path / "nope.yaml")])


def test_a_device_is_device_id_else_ascend_device_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEVICE_ID", raising=False)
    monkeypatch.delenv("ASCEND_DEVICE_ID", raising=False)
    assert env_first("DEVICE_ID", "ASCEND_DEVICE_ID") is None
    monkeypatch.setenv("ASCEND_DEVICE_ID", "5")  # what OpenI's NPU jobs set
    assert env_first("DEVICE_ID", "ASCEND_DEVICE_ID") == 5
    monkeypatch.setenv("DEVICE_ID", "0")
    assert env_first("DEVICE_ID", "ASCEND_DEVICE_ID") == 0


def test_src_step_optimizer_gets_the_options_it_names() -> None:
    from src.scaffold.task import Step

    options = {"momentum": 0.9, "lr": 0.1}

    def named(params, lr, momentum, nesterov=False):
        return params, lr, momentum, nesterov

    def older(params, lr, cfg):  # a step.py from before: the whole config
        return cfg

    def unknown(params, lr, weight_decy):
        return None

    args = Step(None, named, None).optimizer_args(options)
    assert Step(None, named, None).make_optimizer("p", 0.1, args) == ("p", 0.1, 0.9, False)
    assert Step(None, older, None).optimizer_args(options)["cfg"].momentum == 0.9
    with pytest.raises(ConfigError, match="asks for 'weight_decy', which is no option"):
        Step(None, unknown, None).optimizer_args(options)
