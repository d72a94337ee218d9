"""What a job name may be (`JOB_NAME_RULE`) and its check.

A job name is spelled into Redis keys, log lines and command lines; `check_job_name` raises
`ConfigError` naming the setting ``job``.
"""

from __future__ import annotations

import re

from crawlq.errors import ConfigError

__all__ = ["JOB_NAME_RULE", "check_job_name"]

_JOB_NAME_MAX = 200
_JOB_NAME_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:-]{{0,{_JOB_NAME_MAX - 1}}}")
JOB_NAME_RULE = (
    f"1 to {_JOB_NAME_MAX} ASCII letters, digits and . _ : - starting with a letter or digit"
)
"""What a job name may be: it is spelled into Redis keys (inside the ``{…}`` hash tag and
their SCAN pattern), log lines and worker command lines, so no braces, glob characters,
spaces, control or non-ASCII characters, and no leading dash (it would read as an option)."""


def check_job_name(name: str) -> str:
    """Return ``name`` if it is a valid job name (`JOB_NAME_RULE`).

    Raises:
        ConfigError: ``name`` breaks the rule; the error names the setting ``job``.
    """
    if not _JOB_NAME_RE.fullmatch(name):
        shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
        raise ConfigError("job", f"a job name must be {JOB_NAME_RULE}; got {shown}")
    return name
