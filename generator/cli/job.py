"""`gen job render`: Kubernetes manifests that run the project's launcher on a cluster."""

from __future__ import annotations

from pathlib import Path

import click

from generator.cli.args import PROJECT_DIR
from generator.jobs.spec import ACCELERATORS, DEFAULT_JOIN_TIMEOUT, GANGS, KINDS, TRAINER_VERSIONS

RENDER_HELP = """Write the manifests that run PROJECT_DIR (default: here) on a cluster.

Prints multi-document YAML for kubectl apply -f -, or writes it to -o FILE.
Nodes, devices per node and the job name default to the project's own
answers; the image to the one gen image push last pushed for the target.

\b
Kinds, the projects they fit, and what each guarantees:
  trainjob    Kubeflow Trainer v2 TrainJob: PyTorch on CUDA. On the stock
              torch-distributed runtime it is no gang: pods start as they
              are placed, and the ranks wait --join-timeout for each other.
              --gang volcano|coscheduling (or --queue, Volcano) renders a
              TrainingRuntime of the job's own whose podGroupPolicy starts
              every node or none (Volcano needs Trainer v2.1+).
  pytorchjob  Kubeflow training-operator v1 PyTorchJob: PyTorch on CUDA. A
              gang (minAvailable, --queue) when the operator runs with a
              gang scheduler (--gang-scheduler-name), else as placed.
  volcano     Volcano Job (pytorch/svc plugins; MindCluster rank table on
              Ascend): PyTorch or MindSpore, CUDA or Ascend. Always a gang
              (minAvailable), in --queue (default: default).
  ascendjob   MindCluster AscendJob: PyTorch or MindSpore on Ascend. A gang
              through Volcano (minAvailable), in --queue (default: default).

torchrun-based kinds do not start MindSpore, and only the MindCluster kinds
bring what NPUs need (ring-controller label, accelerator-type node selector,
host network, driver mounts, rank table; sp-block on A3). A project built
for both targets runs cuda kinds on its CUDA image and ascendjob on its
Ascend image; volcano needs --target there.

Every pod runs bash /app/scripts/run_8p.sh --cluster KIND --join-timeout S
--nproc N [--master-port P] [--data /data] [--output /output], one pod per
node holding N devices (--devices-per-node), which may differ from the
project's.

On a fault each kind reruns the job, at most 3 times, and every pod's
command continues the run its output holds: keep it on --output-pvc (without
one, a warning says a restart starts over). Volcano, PyTorchJob and a
TrainJob's own runtime (--gang, --queue) never rerun exit status 2, a
configuration error; MindCluster kinds carry fault-scheduling=grace (and
fault-retry-times on 910b AscendJobs).

\b
Ascend pods share their node's network, so each job has a port of its own:
P, from a hash of its namespace and name into 20000-29999 (--port to
choose one); CUDA pods keep the operators' default, 23456. On Atlas A3
super pods (accelerator-type module-a3-16-super-pod) ascend-for-volcano
takes a job of several pods only when each holds a whole node (16 NPUs),
and sp-block, the NPUs of one logical super pod (default: the whole job),
must be a multiple of 16 that divides the job's NPUs, at most 768 (48
nodes); a one-pod job's sp-block is its NPUs. host-arch selects the nodes
of the image's CPU: huawei-arm (aarch64) or huawei-x86 (x86_64)."""


# Without a claim the run's outputs live in the container: any restart (a lost node, an
# eviction, the job's own fault policy) starts the run over with nothing to continue.
EPHEMERAL_OUTPUT = (
    "no --output-pvc: the run's outputs and checkpoints die with the pod, and a restarted pod "
    "starts the run over; pass --output-pvc CLAIM to keep them and resume"
)


@click.group()
def job() -> None:
    """Kubernetes training jobs for the project."""


@job.command(help=RENDER_HELP)
@click.option("--kind", type=click.Choice(KINDS), required=True, help="Which job API.")
@PROJECT_DIR
@click.option("--image", help="Image reference (default: logs/image-<target>.pushed).")
@click.option("--nnodes", type=int, help="Nodes (default: the project's nnodes).")
@click.option("--devices-per-node", type=int, help="GPUs/NPUs per node (default: the project's).")
@click.option("--name", help="Job name, a DNS label (default: the project name).")
@click.option("--namespace", help="metadata.namespace of every document.")
@click.option("--queue", help="Volcano queue (a TrainJob's makes it a Volcano gang).")
@click.option(
    "--gang",
    type=click.Choice(GANGS),
    help="trainjob: its own TrainingRuntime with this gang plugin.",
)
@click.option(
    "--trainer-version",
    type=click.Choice(TRAINER_VERSIONS),
    help=f"trainjob: the Kubeflow Trainer release (default: {TRAINER_VERSIONS[-1]}).",
)
@click.option("--data-pvc", metavar="CLAIM", help="PersistentVolumeClaim mounted at /data.")
@click.option("--output-pvc", metavar="CLAIM", help="PersistentVolumeClaim mounted at /output.")
@click.option(
    "--join-timeout",
    type=int,
    default=DEFAULT_JOIN_TIMEOUT,
    show_default=True,
    help="Seconds the launcher waits for every node to join.",
)
@click.option("--target", type=click.Choice(ACCELERATORS), help="For volcano on a 'both' project.")
@click.option("--chip", help="Ascend chip: 910, 910b or 910_93 (default: the project's).")
@click.option(
    "--accelerator-type",
    metavar="LABEL",
    help="Ascend nodes' accelerator-type label (default by chip: module, module-910b-8, "
    "module-a3-16-super-pod).",
)
@click.option(
    "--sp-block",
    type=int,
    metavar="NPUS",
    help="A3 super pods: NPUs per logical super pod (default: the job's, up to 768).",
)
@click.option(
    "--port",
    type=int,
    help="Ascend: the job's rendezvous port on the host network (default: from its name).",
)
@click.option(
    "--sweep",
    is_flag=True,
    help="Run the project's sweep (sweep.py) on one node instead of training once.",
)
@click.option(
    "--parallel",
    type=int,
    metavar="K",
    help="--sweep: trials side by side, the node's devices divided (default: 1).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="File to write."
)
@click.option("--force", is_flag=True, help="Replace the output file if it exists.")
def render(project_dir: Path, output: Path | None, force: bool, **given: object) -> None:
    from generator.jobs.manifests import render as render_text
    from generator.jobs.spec import JobRequest, resolve
    from generator.render.outfile import write_new
    from generator.render.project import read_record

    project_dir = project_dir.resolve()
    spec = resolve(read_record(project_dir), JobRequest(**given), project_dir)  # type: ignore[arg-type]
    text = render_text(spec)
    if output is None:
        click.echo(text, nl=False)
    else:
        write_new(output, text, force=force)
        click.echo(
            f"wrote {output}: {spec.kind} {spec.name}, {spec.nnodes} node(s), image {spec.image}"
        )
    if spec.output_pvc is None:
        click.echo(f"warning: {EPHEMERAL_OUTPUT}", err=True)
