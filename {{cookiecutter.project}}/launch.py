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

``python launch.py --sweep ...`` starts sweep.py instead (README: Tune it), continuing the
sweep its train_url holds (a restarted job's): the sweep's own options (--trials, --parallel,
--ranks, --sweep_config, --train_url) go to it, every other to each trial's train.py. A sweep
uses one node's devices: a job of several nodes, or one the platform started per card, is one
line and exit 2.
"""

import os
import sys

# The variables by which a process knows the platform started it as one rank of the job.
RANK_VARIABLES = (("RANK_ID", "RANK_SIZE"), ("RANK", "WORLD_SIZE"), ("MS_ROLE",))
SWEEP = "--sweep"
# sweep.py's own options (all take a value); the platform's others go to every trial.
SWEEP_OPTIONS = ("--trials", "--parallel", "--ranks", "--sweep_config", "--train_url", "--resume")
# A ModelArts job's nodes (its User Guide, develop-modelarts-0104, table 2).
NODES = ("MA_NUM_HOSTS", "VC_WORKER_NUM")


def started_as_rank(env):
    """The variables that say this process is one rank already, or None."""
    for names in RANK_VARIABLES:
        if all(env.get(name, "").strip() for name in names):
            return names
    return None


def sweep_command(args, env):
    """sweep.py's arguments for the boot file's, or the line why a sweep cannot run here."""
    given = started_as_rank(env)
    if given:
        return None, (
            f"launch.py --sweep: the platform started this process as one rank ({given[0]}): "
            "a sweep starts its trials' ranks itself; start one process per node"
        )
    for name in NODES:
        if env.get(name, "1").strip() not in ("", "1"):
            return None, (
                f"launch.py --sweep: this job has {env[name]} nodes ({name}); a sweep runs its "
                "trials on one node's devices: make it a job of one node"
            )
    own, every, rest = [], [], [a for a in args if a != SWEEP]
    while rest:
        word = rest.pop(0)
        name = word.split("=", 1)[0]
        if name not in SWEEP_OPTIONS:
            every.append(word)
        elif "=" in word:
            own.append(word)
        elif rest:
            own += [word, rest.pop(0)]
        else:
            return None, f"launch.py --sweep: {word} needs a value"
    again = [] if any(w.split("=", 1)[0] == "--resume" for w in own) else ["--resume", "auto"]
    return [*again, *own, "--", *every], None


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if SWEEP in sys.argv[1:]:
        command, why = sweep_command(sys.argv[1:], os.environ)
        if why:
            print(f"error: {why}", file=sys.stderr)
            sys.exit(2)
        print(f"launch.py: a sweep: sweep.py {' '.join(command)}")
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, os.path.join(here, "sweep.py"), *command])
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
