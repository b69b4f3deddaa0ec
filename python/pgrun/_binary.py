"""Where the ``pgrun`` binary is: :func:`binary`, the one this package
installed (the environment's scripts folder, the user scheme's, beside
the package) or else the one on ``PATH``."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Optional


def binary() -> str:
    """The path of the ``pgrun`` binary this package installed.

    Looked for in the scripts folder of the environment the module is
    installed in (a venv's ``bin``), the user scheme's (``pip install
    --user``), next to the package (``pip install --target DIR`` puts it in
    ``DIR/bin``), and last on ``PATH``. Raises :class:`FileNotFoundError`
    if there is none.
    """
    name = "pgrun" + (sysconfig.get_config_var("EXE") or "")
    candidates = [sysconfig.get_path("scripts")]
    user_scheme = _user_scheme()
    if user_scheme is not None:
        candidates.append(sysconfig.get_path("scripts", scheme=user_scheme))
    candidates.append(str(Path(__file__).resolve().parent.parent / "bin"))
    for folder in candidates:
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found is not None:
        return found
    raise FileNotFoundError(f"no {name} binary in {', '.join(candidates)} or on PATH")


def _user_scheme() -> Optional[str]:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    scheme = f"{os.name}_user"
    return scheme if scheme in sysconfig.get_scheme_names() else None
