"""What every CLI command shares: the config it runs against, how errors are shown, and the
helpers the command groups have in common (the audit actor, --yes, times, secrets)."""

from __future__ import annotations

import functools
import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.markup import escape

from identityctl.cli.output import done, emit_json, errors
from identityctl.config import Config, load_config, resolve_config_path
from identityctl.errors import ConfigError, IdentityError, InvalidField
from identityctl.services.origin import RequestOrigin

F = TypeVar("F", bound=Callable[..., Any])

#: The next step after an error whose fix is another command, in the command line's words
#: (the MCP tools name their own tools: mcp/tools.py).
NEXT_STEP = {"theme_placeholder": "`identityctl theme list` shows the themes."}


class Session:
    """The --config chosen for this invocation, loaded and connected on first use."""

    config_path: str | None = None
    _config: Config | None = None

    @classmethod
    def config(cls) -> Config:
        if cls._config is None:
            cls._config = load_config(resolve_config_path(cls.config_path))
        return cls._config

    @classmethod
    def connected(cls) -> Config:
        """The config, with the store connected and migrated."""
        from identityctl.services.admin.bootstrap import open_store

        config = cls.config()
        open_store(config)
        return config

    @classmethod
    def reset(cls, config_path: str | None) -> None:
        cls.config_path, cls._config = config_path, None


def command(group: typer.Typer, *args: Any, **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose domain errors print as one clear line and exit 1."""

    def register(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*call_args: Any, **call_kwargs: Any) -> Any:
            as_json = call_kwargs.get("as_json", False)
            try:
                return function(*call_args, **call_kwargs)
            except IdentityError as exc:
                if as_json:
                    emit_json({"error": exc.to_dict()})
                else:
                    errors.print(f"[red]error[/red] [bold]{exc.code}[/bold]: "
                                 f"{escape(exc.description or exc.message)}")
                    if exc.code in NEXT_STEP:
                        errors.print(escape(NEXT_STEP[exc.code]))
                raise typer.Exit(1) from None
            except ConfigError as exc:
                for problem in getattr(exc, "problems", [exc]):  # every one, each on a line
                    errors.print(f"[red]config error[/red] {escape(str(problem))}")
                raise typer.Exit(2) from None

        group.command(*args, **kwargs)(wrapper)
        return function

    return register


#: The largest document a command reads (--file, --schema-file, `apply -f`): a whole
#: configuration export is far smaller; anything larger is refused before it is parsed.
MAX_DOCUMENT_BYTES = 2**20


def read_document(path: Path) -> bytes:
    """The bytes of the document at ``path`` ('-' for standard input), refused past
    MAX_DOCUMENT_BYTES without reading further."""
    try:
        if str(path) == "-":
            data = typer.get_binary_stream("stdin").read(MAX_DOCUMENT_BYTES + 1)
        else:
            with path.open("rb") as handle:
                data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except FileNotFoundError:
        raise IdentityError(f"{path} does not exist.", code="file_not_found") from None
    except OSError as exc:
        raise IdentityError(f"{path} cannot be read: {exc.strerror or exc}",
                            code="file_not_found") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise IdentityError(f"{path} is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB, the "
                            "most a document may hold.", code="document_too_large")
    return data


def _size(count: int) -> str:
    return f"{count // 2**20} MiB" if count >= 2**20 else f"{count // 2**10} KiB"


def read_regular_file(path: Path, *, limit: int, code: str) -> bytes:
    """The bytes of the regular file at ``path``, refused with ``code`` past ``limit``
    without reading further. A device, a pipe or a directory (``/dev/zero``, a FIFO) is
    refused before anything is read from it: it may never end, or never begin."""
    try:
        # Non-blocking: opening a FIFO no one writes to returns at once (so it is refused).
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise IdentityError(f"{path} does not exist.", code="file_not_found") from None
    except OSError as exc:
        raise IdentityError(f"{path} cannot be read: {exc.strerror or exc}",
                            code="file_not_found") from None
    with open(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise IdentityError(f"{path} is not a regular file (a device, a pipe or a "
                                f"directory); give the file itself.", code=code)
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise IdentityError(f"{path} cannot be read: {exc.strerror or exc}",
                                code="file_not_found") from None
    if len(data) > limit:
        raise IdentityError(f"{path} is larger than {_size(limit)}, the most it may hold.",
                            code=code)
    return data


def read_json_file(path: Path) -> Any:
    """A JSON document from ``path`` ('-' for standard input)."""
    data = read_document(path)
    try:
        return json.loads(data)
    except RecursionError:
        raise IdentityError(f"{path} nests JSON too deeply.", code="malformed_json") from None
    except ValueError as exc:  # not JSON, not UTF-8, or a number of too many digits
        raise IdentityError(f"{path} is not valid JSON: {exc}", code="malformed_json") from None


#: Who the audit events of the command line name, from no address (the host's own operator).
ORIGIN = RequestOrigin(actor="cli")

YesOption = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation (scripts).")


def confirm_and_delete(what: str, record_id: str, delete: Callable[..., None], *, yes: bool,
                       as_json: bool, shown: dict[str, Any]) -> None:
    """Ask first (unless --yes), delete through the service, report what went.

    The question goes to stderr so that --json output stays one clean document.
    """
    if not yes:
        typer.confirm(f"Delete {what}? This cannot be undone.", abort=True, err=True)
    delete(record_id, origin=ORIGIN)
    done(f"deleted {what}", as_json=as_json, data={"deleted": record_id, **shown})


def when(epoch: float | None) -> str:
    """An epoch time as people read it (UTC)."""
    return "-" if epoch is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def parse_assignments(pairs: list[str], option: str) -> dict[str, str]:
    """NAME=VALUE arguments as a dict (a value may itself contain '=')."""
    values = {}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name.strip():
            raise InvalidField(option, f"{pair!r} is not NAME=VALUE")
        values[name.strip()] = value
    return values


def read_secret(prompt: str, *, from_stdin: bool) -> str:
    """One line of standard input, or a hidden prompt asked twice (never an argument)."""
    if from_stdin:
        return typer.get_text_stream("stdin").readline().rstrip("\r\n")
    return typer.prompt(prompt, hide_input=True, confirmation_prompt=True, err=True)


def end_sessions(user_id: str, reason: str) -> int:
    """A changed credential or standing ends the user's sign-in sessions everywhere (their
    clients are told by back-channel logout)."""
    from identityctl.services.accounts import sessions
    from identityctl.services.context import ServiceContext

    return sessions.end_user_sessions(ServiceContext.for_config(Session.config()), user_id,
                                      origin=ORIGIN, reason=reason)
