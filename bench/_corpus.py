"""A corpus to serve: a directory used in place, or a tarball unpacked once per run.

``--corpus`` of the bench scripts takes either:

- a **directory**: served where it is (nginx follows symlinks inside it); the seed is the
  shallowest ``index.html`` under it;
- a **tarball** (``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.xz``, ``.tar.bz2``: any compression
  `tarfile` reads) unpacked into the run's temp dir with the ``data`` filter (PEP 706: no
  absolute paths, no ``..``, no device files). Symlinks and hard links that stay inside the
  corpus are kept, as docs trees use them (a page shared by two versions); a link that points
  outside it, or is absolute, is skipped and counted, not followed, since nothing outside the
  corpus may be served.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Corpus", "prepare_corpus"]


@dataclass
class Corpus:
    """A corpus ready to serve: ``root`` holds the seed page ``index.html``."""

    root: Path
    source: Path
    skipped_links: int = 0  # tarball links out of the corpus, not extracted

    def describe(self) -> str:
        """One line for the header: where it came from and what was skipped."""
        kind = "directory" if self.source.is_dir() else "tarball"
        skipped = f", {self.skipped_links} link(s) out of it skipped" if self.skipped_links else ""
        return f"{kind} {self.source} (root {self.root}{skipped})"


def _index_dir(top: Path) -> Path:
    found = sorted(top.rglob("index.html"), key=lambda p: (len(p.parts), str(p)))
    if not found:
        raise FileNotFoundError(f"no index.html under {top}")
    return found[0].parent


def prepare_corpus(source: Path, workdir: Path) -> Corpus:
    """The corpus at ``source`` ready to serve, unpacked under ``workdir / "site"`` if a tarball.

    Raises:
        FileNotFoundError: No ``source``, or no ``index.html`` in it.
        tarfile.TarError: The archive is corrupt, or has a member the filter refuses other
            than a link out of the corpus.
    """
    if source.is_dir():
        return Corpus(_index_dir(source), source)
    if not source.exists():
        raise FileNotFoundError(f"no corpus at {source}")
    dest = workdir / "site"
    dest.mkdir(parents=True, exist_ok=True)
    skipped = 0

    def keep_inside(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        nonlocal skipped
        try:
            return tarfile.data_filter(member, path)
        except (tarfile.AbsoluteLinkError, tarfile.LinkOutsideDestinationError):
            skipped += 1
            return None

    with tarfile.open(source, "r:*") as archive:
        archive.extractall(dest, filter=keep_inside)
    for path in [dest, *dest.rglob("*")]:  # nginx's workers may run as another user
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    return Corpus(_index_dir(dest), source, skipped)
