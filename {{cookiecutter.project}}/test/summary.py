"""Print ModelZoo's end-of-run summary from a run record (hparams.json, metrics.jsonl).

    python3 test/summary.py OUTPUT_DIR --rank-size N --e2e SECONDS --case-dir DIR --mode M

Prints the "Final ..." lines ModelZoo's scripts print, then writes
<case-dir>/<CaseName>.log with one KEY = value line per field, as they do.
"""

import argparse
import json
import platform
from pathlib import Path


def summary(output: Path, rank_size: int, e2e: float, mode: str) -> dict:
    hparams = json.loads((output / "hparams.json").read_text(encoding="utf-8"))
    lines = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    train = [line for line in lines if line["type"] == "train"]
    steps = [line for line in lines if line["type"] == "step"]
    scored = [line for line in lines if line["type"] in ("test", "val")]
    # Steady state, as ModelZoo's scripts leave out their first steps: the first steps pay
    # for compiling and warming up. The step lines after the first (each the rate since
    # the one before); without two of them, the epochs after the first.
    steady = steps[1:] if len(steps) >= 2 else train[1:] or train
    fps = sum(m["samples_per_s"] for m in steady) / len(steady)
    batch = int(hparams["batch_size"])
    # The model the run trained (src/model.py), as the run record names it.
    network = str(hparams.get("model", "lenet"))
    case = f"{network}_bs{batch}_{rank_size}p_{'perf' if mode == 'performance' else 'acc'}"
    return {
        "Network": network,
        "RankSize": rank_size,
        "BatchSize": batch,
        "DeviceType": platform.machine(),
        "CaseName": case,
        "ActualFPS": f"{fps:.2f}",
        # ModelZoo's TrainingTime: milliseconds per step of one device's batch.
        "TrainingTime": f"{batch * 1000 / fps:.2f}",
        "TrainAccuracy": f"{scored[-1]['accuracy']:.4f}" if scored else "N/A",
        "ActualLoss": f"{train[-1]['loss']:.4f}",
        "E2ETrainingTime": f"{e2e:.0f}",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--rank-size", type=int, required=True)
    parser.add_argument("--e2e", type=float, required=True)
    parser.add_argument("--case-dir", type=Path, required=True)
    parser.add_argument("--mode", choices=("full", "performance"), required=True)
    args = parser.parse_args()
    fields = summary(args.output, args.rank_size, args.e2e, args.mode)
    print("------------------ Final result ------------------")
    print(f"Final Performance images/sec : {fields['ActualFPS']}")
    print(f"Final Train Accuracy : {fields['TrainAccuracy']}")
    print(f"E2E Training Duration sec : {fields['E2ETrainingTime']}")
    args.case_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{key} = {value}\n" for key, value in fields.items())
    (args.case_dir / f"{fields['CaseName']}.log").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
