"""The results database: SQLite (a file, the default) or PostgreSQL (a postgresql:// URL, where a
fleet of runners and a dashboard share one), behind one placeholder style (`?`).

Its schema is versioned: opening a database brings it to the latest version, one migration at a
time, each in the transaction that records it; an older database is upgraded, never dropped. Runners
that open one at once take turns (an advisory lock on PostgreSQL, an immediate transaction on
SQLite), so none applies a migration twice.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

# MIGRATIONS[i] brings a database from version i to i + 1. A database made before versions were
# kept has the tables of version 1 and no schema_version: it is taken as 0, and version 1's
# statements leave its tables as they are.
MIGRATIONS = (
    ("""CREATE TABLE IF NOT EXISTS runs (
        run TEXT PRIMARY KEY, sfu TEXT NOT NULL, version TEXT, started DOUBLE PRECISION,
        recorded DOUBLE PRECISION, git_sha TEXT, chrome TEXT, scenario TEXT, status TEXT, meta TEXT)""",
     """CREATE TABLE IF NOT EXISTS metrics (
        run TEXT NOT NULL REFERENCES runs(run) ON DELETE CASCADE, name TEXT NOT NULL,
        value DOUBLE PRECISION, PRIMARY KEY (run, name))"""),
    # 2: which runner recorded a run (a fleet shares one database), and the trend's lookup indexed
    ("ALTER TABLE runs ADD COLUMN host TEXT",
     "CREATE INDEX IF NOT EXISTS runs_by_sfu ON runs (sfu, started)"),
)
VERSION = len(MIGRATIONS)
LOCK = 0x5f0bec4   # the advisory lock key runners migrating one PostgreSQL database take turns on


class DatabaseError(RuntimeError):
    pass


def is_postgres(target: str | Path) -> bool:
    return str(target).startswith(("postgresql://", "postgres://"))


def shown(target: str | Path) -> str:
    """The database as messages name it: a URL without its credentials."""
    return str(target).split("@")[-1] if is_postgres(target) else str(target)


class DB:
    """One connection, used as a context: committed when the block ends normally, rolled back when
    it raises."""

    def __init__(self, target: str | Path, timeout: float = 30.0):
        target = str(target)
        self.postgres = is_postgres(target)
        if self.postgres:
            try:
                import psycopg
            except ImportError:
                raise DatabaseError(f"the results DB {shown(target)} is PostgreSQL, which needs the psycopg "
                                    "package: pip install psycopg") from None
            try:
                self.conn = psycopg.connect(target, connect_timeout=max(1, round(timeout)))
            except psycopg.OperationalError as e:
                raise DatabaseError(f"the results DB {shown(target)}: {str(e).strip().splitlines()[0]}") from None
        else:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(target, timeout=timeout)
            self.conn.execute("PRAGMA foreign_keys = ON")
        try:
            self.migrate()
        except BaseException:
            self.conn.close()
            raise

    def execute(self, sql: str, params: tuple = ()):
        cur = self.conn.cursor()
        cur.execute(sql.replace("?", "%s") if self.postgres else sql, params)
        return cur

    def version(self) -> int:
        self.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self.execute("SELECT max(version) FROM schema_version").fetchone()
        return row[0] or 0

    def migrate(self) -> None:
        """Brings the database to VERSION, one runner at a time."""
        if self.postgres:
            self.execute("SELECT pg_advisory_xact_lock(?)", (LOCK,))
        else:
            self.conn.commit()
            self.conn.execute("BEGIN IMMEDIATE")
        try:
            found = self.version()
            if found > VERSION:
                raise DatabaseError(f"the results DB is at schema version {found}, newer than this sfubench "
                                    f"({VERSION}): upgrade sfubench")
            for version in range(found, VERSION):
                for statement in MIGRATIONS[version]:
                    self.execute(statement)
                self.execute("DELETE FROM schema_version")
                self.execute("INSERT INTO schema_version (version) VALUES (?)", (version + 1,))
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            raise

    def exclusive(self) -> None:
        """Makes the rest of this transaction the only writer: what it reads stays true until it commits."""
        if self.postgres:
            self.execute("SELECT pg_advisory_xact_lock(?)", (LOCK + 1,))
        else:
            self.conn.commit()
            self.conn.execute("BEGIN IMMEDIATE")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.conn.commit()
        else:
            self.conn.rollback()
        self.conn.close()
