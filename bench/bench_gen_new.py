"""Benchmark: `gen new` wall time against plain `cookiecutter --no-input` on the same template.

Both are run as the user runs them (a fresh process each time), interleaved so
that machine noise hits both alike; the medians and their ratio are printed.
Targets (issue #2): gen new median <= 0.3 s and <= 1.1x cookiecutter.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _time(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    gen_times: list[float] = []
    cc_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(args.runs + 1):
            gen = _time([str(BIN / "gen"), "new", f"g{i}", "--no-input"], work)
            cc = _time([str(BIN / "cookiecutter"), "--no-input", str(REPO), f"project=c{i}"], work)
            if i:  # the first pair warms the file cache
                gen_times.append(gen)
                cc_times.append(cc)
    gen_median = statistics.median(gen_times)
    cc_median = statistics.median(cc_times)
    print(f"{'command':<28}{'median s':>10}{'min s':>10}")
    print(f"{'gen new --no-input':<28}{gen_median:>10.3f}{min(gen_times):>10.3f}")
    print(f"{'cookiecutter --no-input':<28}{cc_median:>10.3f}{min(cc_times):>10.3f}")
    ratio = gen_median / cc_median
    print(
        f"ratio gen/cookiecutter: {ratio:.2f}x (target <= 1.1x); "
        f"gen median {gen_median:.3f} s (target <= 0.3 s)"
    )


if __name__ == "__main__":
    main()
