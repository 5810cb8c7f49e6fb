"""Convert an exported model to an Ascend offline model (.om) with CANN's ATC, for this
project's chip: ``python3 scripts/atc.py export/MODEL.onnx [--run]`` (or .air).

It reads the file's sidecar (MODEL.onnx.json, written by export.py), checks what it can
without a device (the sidecar is there and names this file, its input shape agrees with
the model file's), and prints the atc command: the input's name and shape from the
sidecar, --framework 5 (ONNX) or 1 (AIR), --soc_version the chip's (npu-smi's name for
it when the driver is here). --run runs it, where CANN's toolkit is installed.
Standard library only (onnx, when installed, reads the file's own input shape).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# ATC's --framework: the source format's number (CANN ATC guide, "--framework").
FRAMEWORKS = {".onnx": 5, ".air": 1}
# The project's chip ({{ cookiecutter.chip }}); npu-smi's name for the one in the server wins.
{%- if cookiecutter.chip == '910' %}
SOC_VERSION = "Ascend910A"
{%- elif cookiecutter.chip == '910_93' %}
SOC_VERSION = "Ascend910_9392"
{%- else %}
SOC_VERSION = "Ascend910B3"
{%- endif %}
TOOLKIT = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
INSTALL = (
    "install CANN's toolkit (Ascend-cann-toolkit, the version of the image's CANN) and "
    f"source {TOOLKIT}; the Ascend image of this project has it"
)


class Refused(Exception):
    """What is wrong, in one line."""


def soc_version() -> str:
    """The chip's name as ATC wants it: "Ascend" + the name npu-smi shows, else the
    project's chip's usual one."""
    tool = shutil.which("npu-smi")
    if tool:
        try:
            info = subprocess.run([tool, "info"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return SOC_VERSION
        found = re.search(r"^\|\s*\d+\s+(?:Ascend)?(910\w*)\s", info.stdout, re.MULTILINE)
        # An Atlas A3's npu-smi names its chips "Ascend910" alone: the name says no more.
        if found and found.group(1) != "910":
            return "Ascend" + found.group(1)
    return SOC_VERSION


def onnx_input_shape(path: Path) -> list[object] | None:
    """The ONNX file's own input shape (a name for a dynamic axis), when onnx is installed."""
    try:
        import onnx
    except ImportError:
        return None
    model = onnx.load(str(path), load_external_data=False)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims]


def command(model: Path) -> list[str]:
    """The atc command for ``model``, after checking its sidecar."""
    suffix = model.suffix.lower()
    if suffix not in FRAMEWORKS:
        raise Refused(f"{model}: ATC converts .onnx or .air files (export.py --format ...)")
    if not model.is_file():
        raise Refused(f"{model}: no such file (python export.py writes it)")
    sidecar = model.with_name(model.name + ".json")
    try:
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        name, shape = meta["input"]["name"], [int(side) for side in meta["input"]["shape"]]
    except OSError:
        raise Refused(f"{sidecar}: no such file; export again with export.py") from None
    except (ValueError, KeyError, TypeError) as err:
        raise Refused(f"{sidecar} is not export.py's sidecar ({err}); export again") from None
    if meta.get("file") != model.name:
        raise Refused(f"{sidecar} describes {meta.get('file')}, not {model.name}; export again")
    if suffix == ".onnx":
        own = onnx_input_shape(model)
        if own is not None and (
            len(own) != len(shape)
            or any(isinstance(a, int) and a and a != b for a, b in zip(own, shape))
        ):
            raise Refused(f"{model} takes {own}, its sidecar says {shape}; export again")
    return [
        "atc",
        f"--model={model}",
        f"--framework={FRAMEWORKS[suffix]}",
        f"--output={model.with_suffix('')}",
        f"--input_shape={name}:{','.join(map(str, shape))}",
        f"--input_format={'NCHW' if len(shape) == 4 else 'ND'}",
        f"--soc_version={soc_version()}",
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="the exported .onnx or .air file")
    parser.add_argument("--run", action="store_true", help="run atc (CANN's toolkit needed)")
    args = parser.parse_args(argv)
    try:
        cmd = command(args.model)
    except Refused as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(shlex.join(cmd), flush=True)
    if not args.run:
        return 0
    if shutil.which("atc") is None:
        print(f"error: atc is not on PATH: {INSTALL}", file=sys.stderr)
        return 2
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
