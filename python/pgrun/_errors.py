"""pgrun's own failures: :class:`PgrunError`, and how its one-line message
is found in what pgrun wrote to stderr (its last line, prefixed
``pgrun: ``) or in the report's ``error``."""

from __future__ import annotations

from typing import Optional, Union

from ._report import Report


class PgrunError(Exception):
    """pgrun itself failed (exit status 125, or 4 from ``pgrun status``).

    ``message`` is pgrun's one error line (``pgrun: ...``); where pgrun
    said none that this module saw (a run cancelled before it started, a
    report :func:`wait` cannot read, a 125 without a report or a captured
    stderr), it is the module's own account, not prefixed. ``returncode``
    the status pgrun exited with, ``stderr`` all that it wrote there (empty
    when stderr was not captured) and ``report`` the run's report if one
    was written.
    """

    def __init__(
        self,
        message: str,
        returncode: int,
        stderr: bytes = b"",
        report: Optional["Report"] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        self.stderr = stderr
        self.report = report


def _bytes(data: Union[bytes, str]) -> bytes:
    return data.encode() if isinstance(data, str) else data


def _pgrun_line(stderr: Optional[Union[bytes, str]]) -> Optional[str]:
    """pgrun's own line, if stderr ends with one: pgrun says its failure (and
    wait its outcome) last, after the run is gone, prefixed ``pgrun: ``."""
    lines = _bytes(stderr or b"").decode(errors="replace").splitlines()
    if lines and lines[-1].startswith("pgrun: "):
        return lines[-1]
    return None


def _error(returncode: int, stderr: Optional[Union[bytes, str]], report: Optional[Report]) -> PgrunError:
    """The exception for pgrun's own failure: its first stderr line, else
    the report's error."""
    raw = stderr or b""
    data = raw.encode() if isinstance(raw, str) else raw
    lines = data.decode(errors="replace").splitlines()
    if report is not None and report.error:
        # With --verbose, stderr has other pgrun: lines: take the error's.
        said = f"pgrun: {report.error}"
        message = said if said in lines or not lines else next(
            (line for line in lines if line.startswith("pgrun: ") and report.error in line), said
        )
    elif lines:
        message = lines[0]
    else:
        message = f"pgrun: failed with exit status {returncode}"
    return PgrunError(message, returncode, data, report)
