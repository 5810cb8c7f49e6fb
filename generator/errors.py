"""The one exception tree: everything gen raises on purpose derives from GenError."""

from __future__ import annotations


class GenError(Exception):
    """Base of every error gen reports to the user as one line (``error: ...``).

    ``exit_code`` is what the CLI exits with; subclasses keep whatever the user
    needs to act on (the failing field, the build log tail) as attributes.
    """

    exit_code = 1


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


class RenderError(GenError):
    """Raised when cookiecutter fails to render the template (a hook or a Jinja error)."""
