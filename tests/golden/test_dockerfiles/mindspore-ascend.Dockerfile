# Training image for demo: MindSpore on Ascend NPUs.
#   gen image build --target ascend    (or: docker build -f Dockerfile.ascend .)
# Classic-builder compatible (the docker SDK builds without BuildKit): no RUN --mount.
# Base and pins come from train-template's image catalogue, entry cann8.5.0-910b-ubuntu22.04.
# That base is CANN 8.5.0 for the 910b chip.
# Override them with --build-arg: BASE_IMAGE (and PYTHON) for another base, FRAMEWORK for
# another version, PIP_INDEX_URL for a mirror, PIP_NO_INDEX=1 with ./wheelhouse offline.
# gen builds the stages up to `runtime` once as a dependency image, keyed by what they
# install, and the last stage FROM it with a context of the code alone.
ARG BASE_IMAGE=ascendai/cann:8.5.0-910b-ubuntu22.04-py3.11
# The interpreter the pins are for; gen finds the one a swapped-in base has.
ARG PYTHON=python3.11
ARG FRAMEWORK="mindspore==2.8.0"

# Python on the base, first: it changes only with the base image.
FROM ${BASE_IMAGE} AS python
ARG PYTHON
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# CANN images ship Python 3.11; apt only runs on a base without one.
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
# --system-site-packages: CANN's own Python packages (te, hccl) live in the base's Python.
# FRAMEWORK is a list of requirements: split on purpose.
# hadolint ignore=SC2086
RUN "$PYTHON" -m venv --system-site-packages /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --find-links /tmp/deps \
        $FRAMEWORK -r /tmp/deps/requirements.txt

# The runtime: the venv without pip's inputs, the run-as user, the entry point. gen keeps
# the image up to here as the dependency image: only a dependency change rebuilds it.
FROM python AS runtime
COPY --from=deps /opt/venv /opt/venv
# HwHiAiUser is the account Ascend drivers grant the NPU devices to: give it the host's
# uid and gid (--build-arg HWHIAI_UID/HWHIAI_GID) so that mounted driver files are its own.
# A CANN base that defines HwHiAiUser already keeps its own.
ARG HWHIAI_UID=1000
ARG HWHIAI_GID=1000
RUN { getent group HwHiAiUser >/dev/null \
        || groupadd --non-unique --gid "$HWHIAI_GID" HwHiAiUser; } \
    && { id -u HwHiAiUser >/dev/null 2>&1 \
        || useradd --create-home --non-unique --uid "$HWHIAI_UID" --gid HwHiAiUser HwHiAiUser; }
# What the image is for: train.py's --device_target auto warns when no such device is
# visible, rather than quietly training on the CPU.
ENV PATH=/opt/venv/bin:$PATH \
    TRAIN_ACCELERATOR=npu
# The launchers write to /app/output unless told otherwise (a job's volume): it and the
# directory the ranks run in belong to the run-as user, not to root as WORKDIR makes them.
WORKDIR /app
RUN mkdir -p /app/output && chown HwHiAiUser:HwHiAiUser /app /app/output
# By name: a CANN base may already define HwHiAiUser with its own uid.
# hadolint ignore=DL3066
USER HwHiAiUser
# env.sh applies CANN's set_env.sh and the HCCL settings before the command runs.
ENTRYPOINT ["/bin/bash", "-c", ". /app/env.sh && exec \"$@\"", "--"]
CMD ["python", "train.py"]
ARG BASE_IMAGE
ARG FRAMEWORK
LABEL org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.train-template.target="ascend" \
      io.train-template.framework="${FRAMEWORK}" \
      io.train-template.catalog-entry="cann8.5.0-910b-ubuntu22.04"

# The code, last and alone: an edit rebuilds only these few layers.
FROM runtime
# Declared before the copies: a new revision alone changes only the label below.
ARG REVISION=unknown SOURCE=unknown
# sweep.py and sweep.yaml by wildcard: a project without sweeps builds too.
COPY --chown=HwHiAiUser:HwHiAiUser requirements.txt config.yaml env.sh train.py eval.py \
    predict.py export.py launch.py sweep*.py sweep*.yaml \
    rank_table_8p.json ./
COPY --chown=HwHiAiUser:HwHiAiUser src ./src
COPY --chown=HwHiAiUser:HwHiAiUser scripts ./scripts
# A few images to label: the smoke test runs predict.py on them.
COPY --chown=HwHiAiUser:HwHiAiUser samples ./samples
# Labels last: a new revision changes only metadata, never a layer.
LABEL org.opencontainers.image.title="demo" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}"
