"""Result stores: the `Store` contract and `open_store`, which picks a backend from a URL.

* `crawlq.store.contract`: `Store`, and what it answers (`StoreCounts`, `StoredOutcome`);
* `crawlq.records`: what a write holds (`ResultBatch`, `ParseUpdate`), beside its records;
* `crawlq.store.sql`: what the two SQL stores share (the dialect, writes, reads);
* `crawlq.store.sqlite`, `crawlq.store.postgres`: the backends, each with ``store.py`` (the
  `Store` object with its writes) and ``schema.py`` (open, versions, migrations);
* `crawlq.store.warc`: WARC files written beside either store.

This is the only module that knows every backend; each is imported when it is asked for.
"""

from __future__ import annotations

from crawlq.errors import ConfigError
from crawlq.items.schema import ItemTable
from crawlq.records import ParseUpdate, ResultBatch
from crawlq.settings import check_store
from crawlq.store.contract import Store, StoreCounts, StoredOutcome

__all__ = ["ParseUpdate", "ResultBatch", "Store", "StoreCounts", "StoredOutcome", "open_store"]

_SQLITE_PREFIX = "sqlite:///"


async def open_store(
    url: str, *, read_only: bool = False, items_table: ItemTable | None = None
) -> Store:
    """Open the result store that ``url`` names.

    Forms:

    * a plain file path (``crawlq.db``, ``/var/crawl/crawlq.db``): SQLite;
    * ``sqlite:///PATH``: SQLite at PATH, as SQLAlchemy spells it, so ``sqlite:///crawlq.db``
      is relative to the working directory and ``sqlite:////var/crawl/crawlq.db`` absolute;
    * ``postgresql://[user[:password]@]host[:port]/dbname[?options=-csearch_path%3DSCHEMA]``
      (or ``postgres://…``): PostgreSQL, tables in SCHEMA (default ``crawlq``); see
      `crawlq.store.postgres.PostgresStore.open`. Needs the ``postgres`` extra.

    Args:
        url: The ``store`` setting.
        read_only: Only read (``crawlq export``, ``crawlq status``): create, migrate and
            write nothing; the store must already exist. A store older than this crawlq is
            read as it is.
        items_table: Also write every item as a row of this typed table (``--items-table``,
            PostgreSQL only; `crawlq.store.postgres.items_table`); ignored with ``read_only``.

    Returns:
        The open store; the caller closes it.

    Raises:
        ConfigError: The URL has an unknown form (`crawlq.settings.check_store`: a libpq
            ``key=value`` string is refused, not taken for a file name), an empty path, or
            names a backend that is not available; ``name`` is ``"store"``. Named
            ``items_table``: a typed table with a store that is not PostgreSQL, or one that
            exists with other columns.
        StoreError: The backend refused to open (see the backend's ``open``); with
            ``read_only``, also when there is no store there: ``no crawlq store in URL (…)``,
            without the password.
    """
    check_store(url)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from crawlq.store.postgres.store import PostgresStore
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError(
                "store",
                f"the PostgreSQL store needs psycopg 3: pip install 'crawlq[postgres]' ({exc})",
            ) from exc
        return await PostgresStore.open(url, read_only=read_only, items_table=items_table)
    if items_table is not None and not read_only:
        raise ConfigError(
            "items_table",
            f"--items-table {items_table.name} needs a PostgreSQL store "
            "(--store postgresql://…); a SQLite store keeps items as JSON only",
        )
    path = url.removeprefix(_SQLITE_PREFIX)
    if not path.strip():
        raise ConfigError("store", f"no file path in store URL {url!r}")

    # Backends are imported on demand, so a missing driver only matters to its users.
    from crawlq.store.sqlite.store import SqliteStore

    return await SqliteStore.open(path, read_only=read_only)
