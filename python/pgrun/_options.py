"""pgrun's command line from Python values: durations and sizes spelled as
pgrun parses them, flags and valued options, the options of a run in
``pgrun --help``'s order, the command after ``--``, and paths taken in the
run's ``cwd``. Pure functions: nothing here runs anything."""

from __future__ import annotations

import datetime
import os
from decimal import Decimal
from typing import List, Optional, Sequence, Union, overload

from ._types import Arg, Argv, Duration, Size, StrPath


@overload
def _at(cwd: Optional[StrPath], path: StrPath) -> str: ...


@overload
def _at(cwd: Optional[StrPath], path: None) -> None: ...


@overload
def _at(cwd: Optional[StrPath], path: Optional[StrPath]) -> Optional[str]: ...


def _at(cwd: Optional[StrPath], path: Optional[StrPath]) -> Optional[str]:
    """``path`` as the run (started in ``cwd``) and this process both find
    it: a relative path joined to ``cwd`` made absolute (not normalised, so
    ``..`` after a symlink means what it means to pgrun)."""
    if path is None:
        return None
    path = os.fspath(path)
    if cwd is None or os.path.isabs(path):
        return path
    folder = os.fspath(cwd)
    return os.path.join(os.getcwd(), folder, path)


def _duration(value: Duration) -> str:
    """A DUR as pgrun spells it; numbers are seconds, never in exponent form."""
    if isinstance(value, str):
        return value
    if isinstance(value, datetime.timedelta):
        value = Decimal(value.days * 86400 + value.seconds) + Decimal(value.microseconds) / 1000000
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise TypeError(f"a duration is a number of seconds, a timedelta or a string, not {value!r}")
    d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not d.is_finite() or d < 0:
        raise ValueError(f"a duration must be a finite number of seconds >= 0, not {value!r}")
    return format(d, "f")


def _duration_option(name: str, value: Optional[Duration]) -> List[str]:
    return [] if value is None else [name, _duration(value)]


def _flag(name: str, on: bool) -> List[str]:
    return [name] if on else []


def _value_option(name: str, value: Optional[Union[int, float, str, "os.PathLike[str]"]]) -> List[str]:
    if value is None:
        return []
    if isinstance(value, bool):
        raise TypeError(f"{name} takes a value, not {value!r}")
    return [name, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]


def _run_options(
    *,
    timeout: Optional[Duration],
    idle_timeout: Optional[Duration],
    signal: Optional[str],
    kill_after: Optional[Duration],
    escalate: Optional[str],
    preserve_status: bool,
    wait_group: bool,
    pidfile: Optional[StrPath],
    cancel_file: Optional[StrPath],
    max_output: Optional[Size],
    output_file: Optional[StrPath],
    contain: Optional[str],
    no_guard: bool,
    die_with_parent: bool,
    rlimits: Sequence[str],
    memory_max: Optional[Size],
    pids_max: Optional[int],
    cpus: Optional[Union[int, float, str]],
    setsid: bool,
    verbose: bool,
) -> List[str]:
    """The options of a run, in the order ``pgrun --help`` lists them."""
    options: List[str] = []
    options += _duration_option("--timeout", timeout)
    options += _duration_option("--idle-timeout", idle_timeout)
    options += _value_option("--signal", signal)
    options += _duration_option("--kill-after", kill_after)
    options += _value_option("--escalate", escalate)
    options += _flag("--preserve-status", preserve_status) + _flag("--wait-group", wait_group)
    options += _value_option("--pidfile", pidfile) + _value_option("--cancel-file", cancel_file)
    options += _value_option("--max-output", max_output) + _value_option("--output-file", output_file)
    options += _value_option("--contain", contain)
    options += _flag("--no-guard", no_guard) + _flag("--die-with-parent", die_with_parent)
    for limit in rlimits:
        options += ["--rlimit", limit]
    options += _value_option("--memory-max", memory_max) + _value_option("--pids-max", pids_max)
    options += _value_option("--cpus", cpus)
    options += _flag("--setsid", setsid) + _flag("--verbose", verbose)
    return options


def _command(argv: Argv) -> List[Arg]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv is a sequence of arguments, not one string (pgrun runs no shell)")
    command = list(argv)
    if not command:
        raise ValueError("argv is empty: pgrun needs a command")
    return command
