"""The one exception tree: everything gen raises on purpose derives from GenError."""

from __future__ import annotations


class GenError(Exception):
    """Base of every error gen reports to the user as one line (``error: ...``).

    ``exit_code`` is what the CLI exits with; subclasses keep whatever the user
    needs to act on (the failing field, the build log tail) as attributes.
    """

    exit_code = 1

    def lines(self) -> list[str]:
        """What the CLI prints, one ``error:`` line each."""
        return [str(self)]

    def details(self) -> list[str]:
        """Context the CLI prints after the error lines (a log tail), as it is."""
        return []


class OptionError(GenError):
    """Raised when a template option is invalid: the message names the option,
    the value and what is allowed."""

    exit_code = 2

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option


class TemplateNotFound(GenError):
    """Raised when the cookiecutter template cannot be located next to the package."""


class OutputExists(GenError):
    """Raised when the project directory to generate already exists (it is left untouched)."""


class ProjectNotFound(GenError):
    """Raised when a directory given to gen is not a generated project (no .train-template.json)."""


class RenderError(GenError):
    """Raised when cookiecutter fails to render the template (a hook or a Jinja error)."""


class ManyProblems(GenError):
    """Base of the errors that list several problems, one ``error:`` line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)

    def lines(self) -> list[str]:
        return list(self.problems)


class WithTail(GenError):
    """Base of the errors that carry what a tool said (``tail``), shown indented after."""

    def __init__(self, message: str, tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.tail = list(tail or [])

    def details(self) -> list[str]:
        return [f"  {line}" for line in self.tail]


class RankTableInvalid(ManyProblems):
    """Raised when a rank table (or what it is built from) breaks a rule; one problem a line."""


class CatalogError(ManyProblems):
    """Raised when the base-image catalogue (images/) cannot be read or breaks a rule,
    or when no entry fits the requested target, framework, Python or version.

    Each problem is one line: it names the failing field, or says what does not fit
    and the nearest valid choice.
    """

    def __init__(self, *problems: str) -> None:
        super().__init__(list(problems))


class ReportError(GenError):
    """Raised when gen report cannot report runs: a directory that does not exist or holds
    no metrics.jsonl, a malformed line (file and line number named), no matplotlib, or an
    output file that exists without --force. Nothing is written then."""


class FileExists(GenError):
    """Raised when an output file exists and --force was not given (it is left untouched)."""


class EngineError(GenError):
    """Raised when the container engine refuses or fails an operation that no more specific
    error names; the message says what gen was doing and what the engine said."""


class EngineUnavailable(EngineError):
    """Raised when no Docker engine answers, or when it stops answering in the middle of an
    operation (the message says where gen looked, or what it was doing)."""


class PythonMissing(GenError):
    """Raised before an image build when the base image has no Python gen can build with;
    the message names the image and how to choose an interpreter."""


class WheelhouseMismatch(GenError):
    """Raised before a build when a requirement is met only by a wheel of another CPU (a
    none-any wheel holding another CPU's libraries); names the file, its CPU and the image's."""


class BaseImageMissing(GenError):
    """Raised when the Dockerfile's base image is not on the host and cannot be pulled."""


class BuildFailed(GenError):
    """Raised when a Dockerfile step fails: ``step`` is the failing instruction,
    ``tail`` the last log lines and ``log_path`` the full build log."""

    def __init__(self, message: str, step: str, tail: list[str], log_path: str) -> None:
        super().__init__(message)
        self.step, self.tail, self.log_path = step, tail, log_path

    def details(self) -> list[str]:
        return [*(f"  {line}" for line in self.tail), f"full log: {self.log_path}"]


class ImageNotFound(GenError):
    """Raised when an image gen should use (to smoke-test or push) was never built."""


class ContainerFailed(WithTail):
    """Raised when a smoke-test container fails or times out: ``exit_code`` (None on a
    timeout) and the log ``tail`` say what happened."""

    def __init__(self, message: str, exit_code: int | None, tail: list[str]) -> None:
        super().__init__(message, tail)
        self.exit_code_seen = exit_code


class GitFailed(WithTail):
    """Raised when git is missing or a local git command fails unexpectedly; ``tail`` is
    what git said (with any token masked)."""


class IdentityMissing(GenError):
    """Raised when gen push must commit and git has no author name or email configured."""


class UnsafeFiles(ManyProblems):
    """Raised before a push when files that would be committed look like secrets, exceed
    the platform's size limit or are datasets/checkpoints; one ``path: why`` line a file."""

    def details(self) -> list[str]:
        return [
            "nothing was committed or pushed: delete these files or add them to .gitignore "
            "(git rm --cached PATH for tracked ones), then run gen push again"
        ]


class PushFailed(WithTail):
    """Raised when a git or image push fails for a reason none of its subclasses names;
    ``tail`` is what the server or engine said, with secrets masked."""


class RemoteUnreachable(PushFailed):
    """Raised when the git remote or the image registry does not answer."""


class AuthRefused(PushFailed):
    """Raised when the git remote or the registry refuses the credentials, or needs some
    and none were given."""


class RemoteDiverged(PushFailed):
    """Raised when the remote branch has commits the local branch lacks (non-fast-forward)."""


class RemoteMissing(PushFailed):
    """Raised when the remote repository does not exist (or is not exported to this user)."""


class KindDoesNotFit(GenError):
    """Raised when gen job render is asked for a cluster kind the project cannot run on
    (its framework or target); the message names the kinds that fit."""

    exit_code = 2


class ImageUnknown(GenError):
    """Raised when gen job render is given no --image and the project holds no record
    of a pushed image (logs/image-<target>.pushed), or the record is not a reference."""


class UpdateError(GenError):
    """Raised when gen update cannot start or finish: a dirty tree, no base to merge from,
    a template reference that does not resolve. Nothing in the project was changed."""


class UpdateConflicts(ManyProblems):
    """Raised when gen update merged with conflicts: one line a conflicted path. The merge
    is in the work tree; the new template version is recorded by --continue."""

    def details(self) -> list[str]:
        return [
            "resolve them (git mergetool shows the three versions; PATH.gen-new is the "
            "template's binary), git add them, then: gen update --continue",
            "or put everything back with: gen update --abort",
        ]


class SubmitError(GenError):
    """Raised when gen submit cannot build or send a request, or the platform refuses it;
    the message never holds the access key or its secret."""
