"""The boot file: what OpenI's 启动文件 and ModelArts' boot file run, ``python launch.py
--name=value ...``, for jobs of one card or several.

Where the platform starts one command per node, this hands the job to scripts/run_8p.sh,
which counts the GPUs or NPUs the node shows (``--nproc auto``: CUDA_VISIBLE_DEVICES or
ASCEND_VISIBLE_DEVICES, else the device nodes) and starts one rank of train.py on each, with
every argument the platform appended; the data and outputs are the platform's own (its
--data_url and --train_url, C2Net's LOCAL_DATASET_PATH and LOCAL_OUTPUT_PATH), as train.py
finds them.

Where the platform has started one process per card already, this process is that rank and
becomes train.py, starting nothing: ModelArts' Ascend launcher sets RANK_ID, RANK_SIZE and
DEVICE_ID for each process it starts (davincirunsdk's fmk.py, FMK.gen_env_for_fmk), OpenI's
NPU jobs call init() in the boot file itself, torchrun sets RANK and WORLD_SIZE, msrun
MS_ROLE. Starting a launcher there would make N x N ranks on N cards.
"""

import os
import sys

# The variables by which a process knows the platform started it as one rank of the job.
RANK_VARIABLES = (("RANK_ID", "RANK_SIZE"), ("RANK", "WORLD_SIZE"), ("MS_ROLE",))


def started_as_rank(env):
    """The variables that say this process is one rank already, or None."""
    for names in RANK_VARIABLES:
        if all(env.get(name, "").strip() for name in names):
            return names
    return None


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    given = started_as_rank(os.environ)
    if given:
        said = ", ".join(f"{name}={os.environ[name]}" for name in given)
        print(f"launch.py: the platform started this process as one rank ({said}): train.py")
        sys.stdout.flush()
        train = os.path.join(here, "train.py")
        os.execv(sys.executable, [sys.executable, train, *sys.argv[1:]])
    launcher = os.path.join(here, "scripts", "run_8p.sh")
    sys.stdout.flush()
    os.execvp("bash", ["bash", launcher, "--nproc", "auto", "--", *sys.argv[1:]])
