"""Names a job manifest carries, checked as the API server and the operators check them."""

from __future__ import annotations

import re

from generator.errors import OptionError

MAX_LABEL = 63
MAX_SUBDOMAIN = 253
# RFC 1035 label: what Services and TrainJob names must be (a DNS-1123 label that
# starts with a letter). Every operator here names Services after the job.
DNS_LABEL_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_1123_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_RULE = (
    "lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"
)

# [HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST], as docker's reference grammar has it.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
IMAGE_RE = re.compile(
    rf"(?:{_HOST}(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)
IMAGE_RULE = "use [HOST[:PORT]/]NAME[:TAG][@sha256:DIGEST], e.g. registry.example.com/team/demo:v1"


def default_name(project: str) -> str:
    """The job name a project gets when --name is not given: its name as a DNS label."""
    return project.lower().replace("_", "-").rstrip("-")


def check_job_name(name: str, option: str = "--name") -> str:
    """``name`` if it is an RFC 1035 label, else OptionError saying what is allowed."""
    if len(name) > MAX_LABEL:
        raise OptionError(option, f"{name!r} is {len(name)} characters; use at most {MAX_LABEL}")
    if not DNS_LABEL_RE.fullmatch(name):
        raise OptionError(option, f"{name!r} is not a DNS label: use {LABEL_RULE}")
    return name


def check_derived(name: str, derived: list[str], kind: str, option: str) -> None:
    """Refuse a job name whose derived names (pods, Services, ConfigMaps) outgrow a label.

    Operators append suffixes (``-worker-15``, ``rings-config-``) and the result must
    still be a DNS label, so a valid job name can still be too long for its kind.
    """
    longest = max(derived, key=len)
    if len(longest) > MAX_LABEL:
        room = MAX_LABEL - (len(longest) - len(name))
        raise OptionError(
            option,
            f"{name!r} is too long for {kind}: it names {longest!r} ({len(longest)} "
            f"characters, over the {MAX_LABEL} of a DNS label); use at most {room} characters",
        )


def check_namespace(namespace: str) -> str:
    """A namespace is a DNS-1123 label."""
    if len(namespace) > MAX_LABEL or not DNS_1123_LABEL_RE.fullmatch(namespace):
        raise OptionError(
            "--namespace",
            f"{namespace!r} is not a namespace name: use at most {MAX_LABEL} lower-case "
            "letters, digits and '-', starting and ending with a letter or digit",
        )
    return namespace


def check_subdomain(value: str, option: str, what: str) -> str:
    """Queues and PersistentVolumeClaims are named by DNS-1123 subdomains."""
    if len(value) > MAX_SUBDOMAIN or not DNS_SUBDOMAIN_RE.fullmatch(value):
        raise OptionError(
            option,
            f"{value!r} is not a {what} name: use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit",
        )
    return value


def check_image(image: str, option: str = "--image") -> str:
    """An image reference a kubelet can pull: no spaces, docker's grammar."""
    if not IMAGE_RE.fullmatch(image):
        raise OptionError(option, f"{image!r} is not an image reference; {IMAGE_RULE}")
    return image
