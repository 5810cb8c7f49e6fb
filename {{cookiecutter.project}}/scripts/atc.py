"""Convert an exported model to an Ascend offline model (.om) with CANN's ATC, for the chip of
the server it runs on: ``python3 scripts/atc.py export/MODEL.onnx [--run] [--soc_version V]``.

It reads the file's sidecar (MODEL.onnx.json, written by export.py), checks what it can
without a device (the sidecar is there and names this file, its input shape agrees with
the model file's), and prints the atc command: --framework 5 (ONNX) or 1 (AIR); for ONNX
the input's name and shape from the sidecar (an AIR file's shapes are fixed in it, and its
inputs carry the network's own argument names: no --input_shape); --soc_version as CANN
names the chip. --run runs it, where CANN's toolkit is installed.

ONNX, from either framework, is the path to ATC: MindSpore's AIR is deprecated (its
mindspore.export documentation from r2.3 on: "AIR格式已弃用，将被删除").

--soc_version, by CANN's rule (the ATC and AOE --soc_version documentation, "Argument"): on
Atlas A3, whose `npu-smi info` shows only "Ascend910", the Chip Name and the NPU Name of
`npu-smi info -t board -i ID -c CHIP` joined by "_" (Ascend910_9382, Ascend910_9392: A3 parts
come in several); elsewhere "Ascend" and the name `npu-smi info` shows (Ascend910B3,
Ascend910B4-1). A name it cannot read is one line, never a guess; without npu-smi the
printed command carries this project's chip's usual name, with a note, and --run asks for
--soc_version. Standard library only (onnx, when installed, reads the file's input shape).
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
# The project's chip ({{ cookiecutter.chip }}): its usual name, for a command printed away
# from the server (the server's npu-smi decides there).
{%- if cookiecutter.chip == '910' %}
USUAL = "Ascend910A"
{%- elif cookiecutter.chip == '910_93' %}
USUAL = "Ascend910_9392"
{%- else %}
USUAL = "Ascend910B3"
{%- endif %}
# MindSpore's export documentation, r2.3 on: "AIR格式已弃用，将被删除".
AIR_DEPRECATED = "AIR is deprecated in MindSpore (r2.3 on): ONNX is the path to ATC"
TOOLKIT = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
INSTALL = (
    "install CANN's toolkit (Ascend-cann-toolkit, the version of the image's CANN) and "
    f"source {TOOLKIT}; the Ascend image of this project has it"
)
# A chip row of `npu-smi info`: "| 0     910B3     | OK ...", the NPU's id and its name; the
# row under it holds the chip's id: "| 0     0         | 0000:9D:00.0 ...".
NPU_ROW = re.compile(r"^\|\s*(\d+)\s+((?:Ascend)?\d{3}[A-Za-z0-9_-]*)\s+\|\s*\S", re.MULTILINE)
CHIP_ROW = re.compile(r"^\|\s*(\d+)\s+(?:\d+\s+)?\|\s*[0-9A-Fa-f]{4}:", re.MULTILINE)
FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*(\S.*?)\s*$", re.MULTILINE)
# The shape of the names CANN's soc_version takes: Ascend910B3, Ascend910B4-1, Ascend910B2C,
# Ascend910_9382 (A3), Ascend910A, Ascend910ProB, Ascend310P3.
SOC = re.compile(r"^Ascend\d{3}[A-Za-z0-9]*(-\d+)?(_\d{4})?$")


class Refused(Exception):
    """What is wrong, in one line."""


def _npu_smi(*args: str) -> str:
    tool = shutil.which("npu-smi")
    assert tool is not None
    try:
        done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise Refused(f"npu-smi {' '.join(args)} did not run ({err}): give --soc_version") from err
    return done.stdout


def soc_version(given: str | None) -> tuple[str, str | None]:
    """The chip's name as ATC wants it, and a note when it is not the server's own."""
    if given:
        if not SOC.match(given):
            raise Refused(f"--soc_version {given} is not a chip name CANN takes (Ascend910B3 ...)")
        return given, None
    if shutil.which("npu-smi") is None:
        return USUAL, (
            f"no npu-smi here: --soc_version={USUAL} is this project's chip's usual name; on "
            "the server this script reads the chip's own (or give --soc_version)"
        )
    table = _npu_smi("info")
    found = NPU_ROW.search(table)
    if found is None:
        raise Refused("npu-smi info shows no NPU this script can read: give --soc_version")
    npu, name = found.group(1), found.group(2)
    name = name if name.startswith("Ascend") else f"Ascend{name}"
    if name != "Ascend910":
        if not SOC.match(name):
            raise Refused(f"npu-smi info names the chip {name}, which is not a name CANN takes")
        return name, None
    # Atlas A3: npu-smi info says only Ascend910; the board says which part.
    chip = CHIP_ROW.search(table, found.end())
    board = _npu_smi("info", "-t", "board", "-i", npu, "-c", chip.group(1) if chip else "0")
    fields = dict(FIELD.findall(board))
    chip_name, npu_name = fields.get("Chip Name", ""), fields.get("NPU Name", "")
    if not chip_name or not re.fullmatch(r"\d{4}", npu_name):
        raise Refused(
            f"npu-smi info -t board -i {npu} shows no Chip Name and NPU Name (an Atlas A3's "
            "Ascend910 and 93xx): give --soc_version, Chip Name_NPU Name (CANN's rule)"
        )
    chip_name = chip_name if chip_name.startswith("Ascend") else f"Ascend{chip_name}"
    return f"{chip_name}_{npu_name}", None


def onnx_input_shape(path: Path) -> list[object] | None:
    """The ONNX file's own input shape (a name for a dynamic axis), when onnx is installed."""
    try:
        import onnx
    except ImportError:
        return None
    try:
        model = onnx.load(str(path), load_external_data=False)
        dims = model.graph.input[0].type.tensor_type.shape.dim
    except Exception as err:  # noqa: BLE001 (onnx's parse errors have no common base)
        raise Refused(f"{path} is not an ONNX model onnx can read ({err}); export again") from err
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims]


def command(model: Path, soc: str) -> list[str]:
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
    words = ["atc", f"--model={model}", f"--framework={FRAMEWORKS[suffix]}"]
    words.append(f"--output={model.with_suffix('')}")
    if suffix == ".onnx":
        own = onnx_input_shape(model)
        if own is not None and (
            len(own) != len(shape)
            or any(isinstance(a, int) and a and a != b for a, b in zip(own, shape))
        ):
            raise Refused(f"{model} takes {own}, its sidecar says {shape}; export again")
        words.append(f"--input_shape={name}:{','.join(map(str, shape))}")
        words.append(f"--input_format={'NCHW' if len(shape) == 4 else 'ND'}")
    return [*words, f"--soc_version={soc}"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="the exported .onnx or .air file")
    parser.add_argument("--run", action="store_true", help="run atc (CANN's toolkit needed)")
    parser.add_argument("--soc_version", help="the chip's name (default: npu-smi's, CANN's rule)")
    args = parser.parse_args(argv)
    try:
        soc, note = soc_version(args.soc_version)
        if note and args.run:
            raise Refused(f"no npu-smi here to read the chip's name: give --soc_version ({note})")
        cmd = command(args.model, soc)
    except Refused as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.model.suffix.lower() == ".air":
        print(f"note: {AIR_DEPRECATED}", file=sys.stderr)
    if note:
        print(f"note: {note}", file=sys.stderr)
    print(shlex.join(cmd), flush=True)
    if not args.run:
        return 0
    if shutil.which("atc") is None:
        print(f"error: atc is not on PATH: {INSTALL}", file=sys.stderr)
        return 2
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
