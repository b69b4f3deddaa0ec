"""pgrun's ``--report`` JSON as types: :class:`Report` and what it holds
(:class:`ExitStatus`, :class:`SentSignal`, :class:`StreamStats`,
:class:`Output`, :class:`Resources`), parsed from the object or the file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from ._types import StrPath


@dataclass(frozen=True)
class ExitStatus:
    """How the command ended: its exit ``code`` or the ``signal`` name that
    ended it (the other ``None``; both ``None`` if it never ran)."""

    code: Optional[int]
    signal: Optional[str]


@dataclass(frozen=True)
class SentSignal:
    """A stop-sequence signal pgrun sent, ``at_ms`` after pgrun started."""

    signal: str
    at_ms: int


@dataclass(frozen=True)
class StreamStats:
    """One output stream that went through pgrun: ``bytes`` the command
    wrote, ``omitted`` by ``--max-output``, and ``error`` when a failed read
    or write cut the stream short (``None`` when nothing failed)."""

    bytes: int
    omitted: int
    error: Optional[str] = None


@dataclass(frozen=True)
class Output:
    """The report's ``output``: per stream, and the ``--output-file`` path
    (``file``) with the error that ended its copy early (``file_error``)."""

    stdout: StreamStats
    stderr: StreamStats
    file: Optional[str] = None
    file_error: Optional[str] = None


@dataclass(frozen=True)
class Resources:
    """What the run used. The cgroup figures are ``None`` outside
    ``--contain cgroup`` (or where the leaf lacks the file)."""

    user_ms: int
    system_ms: int
    max_rss_kb: int
    memory_peak_bytes: Optional[int]
    pids_peak: Optional[int]
    oom_kills: Optional[int]


@dataclass(frozen=True)
class Report:
    """pgrun's ``--report`` JSON, field by field (``null`` is ``None``).

    ``reason`` is one of ``exited``, ``signaled``, ``timeout``,
    ``idle-timeout``, ``oom``, ``cancelled``, ``cancelled-before-start``,
    ``error``; ``error`` is pgrun's message when ``reason`` is ``error``.
    ``raw`` holds the whole object, fields a later pgrun adds included.
    """

    exit_code: int
    reason: str
    status: ExitStatus
    pgid: Optional[int]
    #: The run's pid file by its absolute path (``None`` without one, or
    #: in a report of a pgrun before reports named it).
    pidfile: Optional[str]
    signals: List[SentSignal]
    stragglers: int
    unreaped: int
    unstopped: int
    output: Optional[Output]
    contain: str
    cgroup_via: Optional[str]
    escaped: int
    cgroup_left: Optional[str]
    resources: Resources
    duration_ms: int
    error: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Report":
        """Build a report from the parsed JSON object."""
        output = obj["output"]
        return cls(
            exit_code=obj["exit_code"],
            reason=obj["reason"],
            status=ExitStatus(code=obj["status"]["code"], signal=obj["status"]["signal"]),
            pgid=obj["pgid"],
            pidfile=obj.get("pidfile"),
            signals=[SentSignal(signal=s["signal"], at_ms=s["at_ms"]) for s in obj["signals"]],
            stragglers=obj["stragglers"],
            unreaped=obj["unreaped"],
            unstopped=obj["unstopped"],
            output=None
            if output is None
            else Output(
                stdout=_stream(output["stdout"]),
                stderr=_stream(output["stderr"]),
                file=output.get("file"),
                file_error=output.get("file_error"),
            ),
            contain=obj["contain"],
            cgroup_via=obj.get("cgroup_via"),
            escaped=obj["escaped"],
            cgroup_left=obj["cgroup_left"],
            resources=Resources(**{k: obj["resources"][k] for k in _RESOURCE_FIELDS}),
            duration_ms=obj["duration_ms"],
            error=obj.get("error"),
            raw=dict(obj),
        )

    @classmethod
    def load(cls, path: StrPath) -> "Report":
        """Read and parse the report pgrun wrote to ``path``."""
        with open(path, "rb") as f:
            return cls.from_json(json.load(f))


_RESOURCE_FIELDS = ("user_ms", "system_ms", "max_rss_kb", "memory_peak_bytes", "pids_peak", "oom_kills")


def _stream(obj: Mapping[str, Any]) -> StreamStats:
    return StreamStats(bytes=obj["bytes"], omitted=obj["omitted"], error=obj.get("error"))
