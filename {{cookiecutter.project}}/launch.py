"""The boot file for jobs of several cards: one training process per device this node shows.

A platform that starts one command per node (OpenI's 启动文件, ModelArts' boot file) runs
`python launch.py --name=value ...`; with `train.py` there, one process trains on one card
and the others stay idle (train.py says so in a WARNING). This hands the job to
scripts/run_8p.sh, which counts the GPUs or NPUs the node shows (`--nproc auto`:
CUDA_VISIBLE_DEVICES or ASCEND_VISIBLE_DEVICES, else the device nodes) and starts one rank
of train.py on each, with every argument the platform appended. On one card it is one rank.
"""

import os
import sys

if __name__ == "__main__":
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "run_8p.sh")
    sys.stdout.flush()
    os.execvp("bash", ["bash", launcher, "--nproc", "auto", "--", *sys.argv[1:]])
