# Training image for demo: MindSpore on CUDA GPUs.
#   gen image build --target cuda    (or: docker build -f Dockerfile.cuda .)
# Classic-builder compatible (the docker SDK builds without BuildKit): no RUN --mount.
# Base and pins come from train-template's image catalogue, entry cuda11.6-ubuntu20.04.
# Override them with --build-arg: BASE_IMAGE (and PYTHON) for another base, FRAMEWORK for
# another version, PIP_INDEX_URL for a mirror, PIP_NO_INDEX=1 with ./wheelhouse offline.
# gen builds the stages up to `runtime` once as a dependency image, keyed by what they
# install, and the last stage FROM it with a context of the code alone.
ARG BASE_IMAGE=nvidia/cuda:11.6.2-cudnn8-runtime-ubuntu20.04
# The interpreter the pins are for; gen finds the one a swapped-in base has.
ARG PYTHON=python3.9
ARG FRAMEWORK="mindspore==2.9.0"

# Python on the base, first: it changes only with the base image.
FROM ${BASE_IMAGE} AS python
ARG PYTHON
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# nvidia/cuda images carry no Python: install apt's python3.9, the one the
# catalogue pins wheels for. A base that has it already skips apt.
# hadolint ignore=DL3008
RUN if ! "$PYTHON" -m venv --help >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends "$PYTHON" "$PYTHON-venv" \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# The framework and requirements in a venv, next: they change only with requirements.txt
# and the pins. Only those (and local wheels) come in here, so editing code never re-runs
# pip; the wheelhouse stays in this stage and never reaches the image.
FROM python AS deps
ARG PYTHON
ARG FRAMEWORK
# pip reads these from the environment: a mirror, an extra index, offline mode.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL=
ARG PIP_NO_INDEX
COPY requirements.txt wheelhouse* /tmp/deps/
# FRAMEWORK is a list of requirements: split on purpose.
# hadolint ignore=SC2086
RUN "$PYTHON" -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --find-links /tmp/deps \
        $FRAMEWORK -r /tmp/deps/requirements.txt

# The runtime: the venv without pip's inputs, the run-as user, the entry point. gen keeps
# the image up to here as the dependency image: only a dependency change rebuilds it.
FROM python AS runtime
COPY --from=deps /opt/venv /opt/venv
RUN useradd --create-home --uid 1000 --user-group train
# What the image is for: train.py's --device_target auto warns when no such device is
# visible, rather than quietly training on the CPU.
ENV PATH=/opt/venv/bin:$PATH \
    TRAIN_ACCELERATOR=cuda
# The launchers write to /app/output unless told otherwise (a job's volume): it and the
# directory the ranks run in belong to the run-as user, not to root as WORKDIR makes them.
WORKDIR /app
RUN mkdir -p /app/output && chown train:train /app /app/output
USER 1000:1000
# env.sh sets the NCCL variables before the command runs.
ENTRYPOINT ["/bin/bash", "-c", ". /app/env.sh && exec \"$@\"", "--"]
CMD ["python", "train.py"]
ARG BASE_IMAGE
ARG FRAMEWORK
LABEL org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.train-template.target="cuda" \
      io.train-template.framework="${FRAMEWORK}" \
      io.train-template.catalog-entry="cuda11.6-ubuntu20.04"

# The code, last and alone: an edit rebuilds only these few layers.
FROM runtime
# Declared before the copies: a new revision alone changes only the label below.
ARG REVISION=unknown SOURCE=unknown
# sweep.py and sweep.yaml by wildcard: a project without sweeps builds too.
COPY --chown=train:train requirements.txt config.yaml env.sh train.py eval.py \
    predict.py export.py launch.py sweep*.py sweep*.yaml ./
COPY --chown=train:train src ./src
COPY --chown=train:train scripts ./scripts
# A few images to label: the smoke test runs predict.py on them.
COPY --chown=train:train samples ./samples
# Labels last: a new revision changes only metadata, never a layer.
LABEL org.opencontainers.image.title="demo" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}"
