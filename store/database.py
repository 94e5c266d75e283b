"""Access to the DuckDB store file, one operation at a time.

DuckDB lets one process hold a file for writing, and any process holding it (even read-only)
keeps writers out. So nothing here keeps the file open: every operation opens it, runs one
transaction (or one page's queries) and closes it, retrying with a bounded backoff while another
process holds the lock. A lock conflict never reaches a user unless the file stays held for
longer than `lock_timeout`, and then the error says who to look for.

Within one process, threads take turns on a file (`_FileTurns`): readers together, a writer alone.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from jetwatch import sql
from jetwatch.core.clock import utcnow
from jetwatch.core.errors import JetwatchError

if TYPE_CHECKING:  # the commands that must answer at once read rows (`rows`) and never load pandas
    import pandas as pd

T = TypeVar("T")

log = logging.getLogger(__name__)


class StoreError(JetwatchError):
    """Base of every error about the store file."""


class StoreLocked(StoreError):
    """Another process kept the file for longer than the lock timeout."""


class StoreMissing(StoreError):
    """The store file does not exist yet (no collector has written to it)."""


class StoreTooNew(StoreError):
    """The file was written by a newer jetwatch, with a schema this code does not know."""


class QueryTimeout(StoreError):
    """A named query ran past its time limit and was interrupted."""


class StoreIsDirectory(StoreError):
    """--db names a directory, not a file."""


# How long a read that found the file damaged waits before it reads the file once more.
READ_AGAIN_AFTER = 0.25


class StoreCorrupt(StoreError):
    """The file is not a readable DuckDB database: another kind of file, truncated or damaged."""


class StoreFull(StoreError):
    """The disk under the store has no space left: nothing of the failed write is kept in the file."""


# How DuckDB's errors are told apart here: by type wherever DuckDB has one, and by text only within
# the types below, where DuckDB has no finer one. A query's own errors (CatalogException,
# ConversionException, ConstraintException, BinderException, ...) quote names and values, so their
# text is never read for a problem of the file, the disk or a lock.
# - IOException: every problem of the file itself (a directory, another kind of file, cut short,
#   no rights, no such directory, a full disk) and another process's lock; DuckDB keeps no errno.
# - Error, its base, raised as such: a damaged block ("Corrupt database file: computed checksum").
# - TransactionException: a COMMIT that failed, the write error it met in its text (a full disk's
#   WAL); FatalException: a write error that invalidated the database, likewise.
# - ConnectionException: a second connection to the file with other settings (a lock conflict in
#   this process); it is also what a closed connection raises, so its text tells the two apart.
# Another connection of this process attaching the file is ResourceInUseException: by type alone.
_DISK_FULL_TYPES = (duckdb.IOException, duckdb.TransactionException, duckdb.FatalException)


def _disk_full(path: Path, exc: BaseException) -> StoreFull | None:
    """A full disk, by its errno where Python raised it, else by the text of the DuckDB errors a
    write error comes as (DuckDB has no type for a full disk, and keeps no errno)."""
    if not (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) and not (
            isinstance(exc, _DISK_FULL_TYPES) and "No space left on device" in str(exc)):
        return None
    return StoreFull(f"The disk under the store {path} is full: the write was not kept. Free space on "
                     f"{path.parent} (or move --db to a larger disk); nothing else needs doing.")


class StoreUnwritable(StoreError):
    """The file cannot be created or opened where --db says: no rights, no such place, read-only."""


_CORRUPT = ("not a valid DuckDB database file", "Could not read enough bytes", "Corrupt database file",
            "checksum", "Failed to read")
_UNWRITABLE = ("Permission denied", "Not a directory", "No such file or directory", "Read-only file system",
               "No space left on device")


# Python's own errors on the store's directory, by errno (DuckDB's carry only the text).
_UNWRITABLE_ERRNO = {errno.EISDIR: "Is a directory", errno.EACCES: "Permission denied", errno.EPERM: "Permission denied",
                     errno.ENOTDIR: "Not a directory", errno.ENOENT: "No such file or directory",
                     errno.EROFS: "Read-only file system", errno.ENOSPC: "No space left on device"}


def _about_the_file(exc: BaseException) -> bool:
    """Whether DuckDB raised this about the file itself: its IOException, or its base Error as such,
    which is what a damaged block's checksum raises ("Corrupt database file: computed checksum ...",
    at open or at the first read of the block). Its other types are a query's own errors, and their
    text may quote anything."""
    return isinstance(exc, duckdb.IOException) or type(exc) is duckdb.Error


def unusable(path: Path, exc: BaseException) -> StoreError | None:
    """The error, in words, for a store file jetwatch cannot use at all (None: not such a case).
    DuckDB raises file problems as IOException (and a damaged block as its base Error) and tells
    them apart only in its text: only such errors (and Python's OSError, by errno) are read for one."""
    if isinstance(exc, OSError) and exc.errno in _UNWRITABLE_ERRNO:
        if exc.errno == errno.EISDIR or path.is_dir():
            return StoreIsDirectory(
                f"--db {path} is a directory, not a store file: point --db at a file, such as {path / 'jetwatch.duckdb'}.")
        return StoreUnwritable(
            f"Cannot open the store {path}: {_UNWRITABLE_ERRNO[exc.errno].lower()}. Point --db at a file in a "
            "directory this user can write to (the directory is created if missing).")
    if not _about_the_file(exc) and not path.is_dir():
        return None
    text = " ".join(str(exc).split())
    if "Is a directory" in text or path.is_dir():
        return StoreIsDirectory(
            f"--db {path} is a directory, not a store file: point --db at a file, such as {path / 'jetwatch.duckdb'}.")
    if any(marker in text for marker in _CORRUPT):
        return StoreCorrupt(
            f"The store {path} is not a readable DuckDB database: it is another kind of file, or truncated or "
            f"damaged ({text}). Move it aside (keep it for inspection) and point --db at a new file, or restore "
            "it from a backup.")
    if any(marker in text for marker in _UNWRITABLE):
        reason = next(m for m in _UNWRITABLE if m in text).lower()
        return StoreUnwritable(
            f"Cannot open the store {path}: {reason}. Point --db at a file in a directory this user can write "
            "to (the directory is created if missing).")
    return None


def corrupt(path: Path, exc: BaseException) -> StoreCorrupt | None:
    """The error, in words, for a file that opened but whose blocks cannot be read (a store cut
    short or damaged past its header): DuckDB finds it only when a query reaches them."""
    text = " ".join(str(exc).split())
    if _about_the_file(exc) and any(marker in text for marker in _CORRUPT):
        return StoreCorrupt(
            f"The store {path} is not a readable DuckDB database: it is truncated or damaged ({text}). Move it "
            "aside (keep it for inspection) and point --db at a new file, or restore it from a backup.")
    return None


# Lock conflicts DuckDB raises under a type that also carries other errors: the text within each type.
_CONFLICTS: tuple[tuple[type[duckdb.Error], tuple[str, ...]], ...] = (
    (duckdb.IOException, ("Could not set lock", "Conflicting lock")),  # another process holds the file
    # In one process, a read-only and a read-write connection to one file cannot coexist either.
    (duckdb.ConnectionException, ("different configuration than existing connections",)),
)


def one_row(cursor: duckdb.DuckDBPyConnection) -> tuple[Any, ...]:
    """The row of a query that always returns one (an aggregate, a key the first migration wrote)."""
    row = cursor.fetchone()
    if row is None:
        raise StoreError("a query that always returns a row returned none: the store is not one jetwatch wrote")
    return row


def _is_lock_conflict(exc: BaseException) -> bool:
    """Another connection holds the file: in this process, DuckDB says so by type (a file attached
    already: ResourceInUseException); a connection opened with other settings is a
    ConnectionException, and another process's lock an IOException, that only their text tells
    apart from the other errors of their type."""
    if isinstance(exc, duckdb.ResourceInUseException):
        return True
    text = str(exc)
    return any(isinstance(exc, kind) and any(marker in text for marker in markers) for kind, markers in _CONFLICTS)


# Rows in each row group a writer makes. A cycle's samples then fill whole row groups, which DuckDB
# compresses and writes to the file while the INSERT runs, on every core; a cycle smaller than one
# row group of DuckDB's default (122,880 rows, more than 100,000 consumers) was written at COMMIT
# instead, in one thread, the whole cycle at once. Readers need no setting: a file holds row groups
# of any size. Sealed samples keep DuckDB's own size (`SEALED_ROW_GROUP_ROWS`, store/sealing.py):
# one consumer's read checks the zone maps of every row group, and there would be 7.5 times as many.
ROW_GROUP_ROWS = 16_384
SEALED_ROW_GROUP_ROWS = 122_880


class _FileTurns:
    """This process's threads' turns on one store file: readers share one, a writer has the file
    alone, and a waiting writer goes before readers who come after it.

    A writer attaches the file (ATTACH, for its row group size), which DuckDB does not enter in
    its cache of open files; a second open of the file in this process (a page's read while the
    dashboard writes an audit row) would then open the file, be refused, and close it, and
    closing any descriptor of a file drops every lock this process holds on it: other processes
    could open it in the middle of the write. So no thread here opens the file out of turn."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0
        self.reader = _ReadingHost()

    @contextlib.contextmanager
    def reading(self, timeout: float) -> Iterator[bool]:
        with self._changed:
            got = self._changed.wait_for(lambda: not self._writing and not self._writers_waiting, timeout)
            if got:
                self._readers += 1
        try:
            yield got
        finally:
            if got:
                with self._changed:
                    self._readers -= 1
                    self._changed.notify_all()

    @contextlib.contextmanager
    def writing(self, timeout: float) -> Iterator[bool]:
        with self._changed:
            self._writers_waiting += 1
            got = False
            try:
                got = self._changed.wait_for(lambda: not self._writing and not self._readers, timeout)
            finally:
                self._writers_waiting -= 1
                if got:
                    self._writing = True
                else:
                    self._changed.notify_all()  # the readers held back for this writer go on
        try:
            yield got
        finally:
            if got:
                with self._changed:
                    self._writing = False
                    self._changed.notify_all()


_turns: dict[str, _FileTurns] = {}
_turns_made = threading.Lock()


def _turns_on(path: Path) -> _FileTurns:
    key = os.path.realpath(path)
    with _turns_made:
        return _turns.setdefault(key, _FileTurns())


class _KeptInstance:
    """An in-memory DuckDB kept between uses, into which a store's file is attached as `store`."""

    def __init__(self) -> None:
        self._duckdb: duckdb.DuckDBPyConnection | None = None

    def _instance(self) -> duckdb.DuckDBPyConnection:
        if self._duckdb is None:
            self._duckdb = duckdb.connect()
        return self._duckdb

    def _free(self) -> None:
        """The file detached, if attached (after a failed attach, whose own error is the one to
        tell, or after the last use): nothing of it may stay attached, or the instance goes."""
        try:
            if self._duckdb is not None:
                self._duckdb.execute("DETACH DATABASE IF EXISTS store")
        except BaseException:
            self.drop()

    def drop(self) -> None:
        host, self._duckdb = self._duckdb, None
        if host is not None:
            with contextlib.suppress(duckdb.Error):
                host.close()


class _WritingHost(_KeptInstance):
    """The in-memory DuckDB into which a Store's writes attach the file, kept between writes.

    A writer attaches the file (ATTACH is where a row group size is given) and detaches it when
    done, which checkpoints and closes it and releases its lock, as closing a connection to it
    does. Making a DuckDB for each write (its catalog of built-in functions) cost more than the
    rest of a small write; kept, a write pays only for attaching and detaching. Each write runs
    on a connection of its own, so what it registers, its temp views, variables and session
    settings end with it (settings of the whole instance, SET GLOBAL, threads, memory_limit, would
    outlive it: no write makes one). If detaching fails the instance is dropped; a write stopped
    by a signal between attaching and detaching leaves the file attached until the next attach,
    which detaches it first."""

    def attach(self, path: Path, row_group_rows: int) -> duckdb.DuckDBPyConnection:
        con = self._instance().cursor()
        try:
            con.execute("DETACH DATABASE IF EXISTS store")
            con.execute(f"ATTACH $path AS store (ROW_GROUP_SIZE {int(row_group_rows)})", {"path": str(path)})
            con.execute("USE store")
        except BaseException:
            con.close()
            self._free()
            raise
        return con

    def detach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Close the write's connection and the file; raises what failed, the instance dropped."""
        try:
            con.execute("USE memory")
            con.execute("DETACH store")
        except BaseException:
            self.drop()
            raise
        finally:
            con.close()


class _ReadingHost(_KeptInstance):
    """The in-memory DuckDB into which this process's readers of one file attach it, read-only.

    The readers in turn on the file at once (`_FileTurns.reading`) share one attachment, each on a
    cursor of its own: the first attaches the file, the last detaches it, which releases its lock
    for other processes' writers. One attachment, as DuckDB's own cache of open files gives
    connections to one file: two would each hold a descriptor of the file, and closing either
    drops every lock this process holds on it, the other reader's included. Kept between reads,
    the instance spares each read the making of a DuckDB (its catalog of built-in functions),
    which cost several times a small read's query. If detaching fails the instance is dropped."""

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()
        self._readers = 0

    def open(self, path: Path) -> duckdb.DuckDBPyConnection:
        """A cursor on the file for one read; `close` it when done."""
        with self._guard:
            if self._readers == 0:
                self._attach(path)
            con = self._instance().cursor()
            self._readers += 1
        try:
            con.execute("USE store")
        except BaseException:
            self.close(con)
            raise
        return con

    def _attach(self, path: Path) -> None:
        host = self._instance()
        try:
            host.execute("DETACH DATABASE IF EXISTS store")
            host.execute("ATTACH $path AS store (READ_ONLY)", {"path": str(path)})
        except BaseException:
            self._free()  # a refused attach (another process writing) leaves the instance as it was
            raise

    def close(self, con: duckdb.DuckDBPyConnection) -> None:
        """End one read; the last one out detaches the file."""
        with self._guard:
            try:
                con.close()
            finally:
                self._readers -= 1
                if self._readers == 0:
                    self._free()


def _close(host: _WritingHost, con: duckdb.DuckDBPyConnection, committed: bool) -> None:
    """Detach a writer's file, which checkpoints it. After a COMMIT the write is kept whatever the
    checkpoint does (what it could not move into the file stays in the WAL, which the next open
    replays), so a failure here is logged, never raised as a lost write; after a failed write,
    the write's own error is the one to tell."""
    try:
        host.detach(con)
    except duckdb.Error as exc:
        if committed:
            log.warning("The write was kept, but closing the store afterwards failed (%s): what it could "
                        "not move into the file stays in its WAL until the next open.", " ".join(str(exc).split()))


def _backoff(deadline: float) -> Iterator[float]:
    delay = 0.005
    while time.monotonic() < deadline:
        yield min(delay, max(0.0, deadline - time.monotonic())) * random.uniform(0.5, 1.0)
        delay = min(delay * 2, 0.2)


class Store:
    """The store file. Writers and readers in any number of processes take turns on it."""

    def __init__(self, path: str | Path, lock_timeout: float = 15.0, query_timeout: float | None = None):
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        # Writers first: a reader holds the file (which keeps every writer out) for at most a third
        # of the time a writer waits for it, so a reader gives way before a writer gives up.
        self.query_timeout = lock_timeout / 3 if query_timeout is None else query_timeout
        self._migrated = False
        self._host = _WritingHost()

    def exists(self) -> bool:
        return self.path.exists()

    def written(self) -> tuple[tuple[int, int] | None, ...]:
        """Where the file and its WAL stand, (modified ns, size) each, None for one that is not there:
        a key for what is read from the store that moves with every committed write (a commit grows
        the WAL, a checkpoint rewrites the file and empties the WAL), for the price of two stat calls,
        not an open of the store. A read that began before a write may be kept under the key from
        before it: the next look sees the write's key and reads again. The times are the file
        system's, a tick of its clock apart at best: two commits within one tick that leave both
        files their sizes would share a key, so a cache on it also keeps its entries for a while only."""
        def stat(path: Path) -> tuple[int, int] | None:
            try:
                found = path.stat()
            except OSError:
                return None
            return found.st_mtime_ns, found.st_size

        return stat(self.path), stat(self.path.with_name(self.path.name + ".wal"))

    def _connect(self, read_only: bool, row_group_rows: int = ROW_GROUP_ROWS) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.lock_timeout
        last: Exception | None = None
        for pause in _backoff(deadline):
            try:
                if read_only:
                    return _turns_on(self.path).reader.open(self.path)
                return self._host.attach(self.path, row_group_rows)
            except duckdb.Error as exc:
                if not _is_lock_conflict(exc):
                    raise unusable(self.path, exc) or exc from None
                last = exc
                time.sleep(pause)
        raise StoreLocked(
            f"The store {self.path} stayed locked by another process for {self.lock_timeout:g}s "
            f"({last}). Another jetwatch process, or a duckdb shell with the file open, is holding "
            "it: close that shell, or raise --lock-timeout."
        )

    @contextlib.contextmanager
    def _turn(self, writing: bool) -> Iterator[None]:
        """This thread's turn on the file among the process's others (`_FileTurns`)."""
        turns = _turns_on(self.path)
        with (turns.writing if writing else turns.reading)(self.lock_timeout) as got:
            if not got:
                raise StoreLocked(
                    f"The store {self.path} stayed busy in this process for {self.lock_timeout:g}s: another of "
                    "its threads kept it (a long write or read). Raise --lock-timeout if this repeats.")
            yield

    def write(self, fn: Callable[[duckdb.DuckDBPyConnection], T], row_group_rows: int = ROW_GROUP_ROWS) -> T:
        """Run fn in one transaction on the file opened read-write, then close it. What fn
        appends is stored in row groups of `row_group_rows`."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise StoreUnwritable(f"Cannot create the store {self.path}: {self.path.parent} is a file, not a "
                                  "directory. Point --db at a file in a directory.") from None
        except OSError as exc:
            raise unusable(self.path, exc) or StoreUnwritable(
                f"Cannot create the directory of the store {self.path}: {exc.strerror}. Point --db at a "
                "file in a directory this user can write to.") from None
        with self._turn(writing=True):
            con = None
            try:
                con = self._connect(read_only=False, row_group_rows=row_group_rows)
                result = self._transaction(con, fn)
            except BaseException as exc:
                if con is not None:
                    with contextlib.suppress(duckdb.Error):  # the write's own error is the one to tell
                        _close(self._host, con, committed=False)
                raise corrupt(self.path, exc) or exc  # noqa: B904 (the error itself, or one that names it and keeps it as its context)
            _close(self._host, con, committed=True)
            return result

    def _transaction(self, con: duckdb.DuckDBPyConnection, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        migrating = not self._migrated  # the migration refuses a newer schema itself
        if migrating:
            self._migrate(con)
        con.execute("BEGIN TRANSACTION")
        try:
            if not migrating:
                self._refuse_newer(con)
            result = fn(con)
        except BaseException as exc:
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise _disk_full(self.path, exc) or exc  # noqa: B904 (the error itself, or one that names it and keeps it as its context)
        try:
            con.execute("COMMIT")
        except duckdb.Error as exc:
            raise _disk_full(self.path, exc) or exc  # noqa: B904 (the error itself, or one that names it and keeps it as its context)
        return result

    def read(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """Run fn on a read-only cursor on the file (`_ReadingHost`), with a time limit, then close
        it. A file that reads as damaged is read once more before it is said to be: a
        reader in another process can catch the file while a writer extends it ("Could not read
        enough bytes"); a damaged file stays damaged, a busy one reads the next time."""
        if not self.path.exists():
            raise StoreMissing(
                f"No store at {self.path} yet: start `jetwatch collect --db {self.path}` "
                "(or `jetwatch up`) and it will appear with the first sample."
            )
        try:
            return self._read_once(fn)
        except StoreCorrupt as first:
            log.debug("the store %s read as damaged; reading it once more: %s", self.path, first)
            time.sleep(READ_AGAIN_AFTER)
            return self._read_once(fn)

    def _read_once(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        with self._turn(writing=False):
            con = self._connect(read_only=True)
            timer = threading.Timer(self.query_timeout, con.interrupt)
            timer.start()
            try:
                return fn(con)
            except duckdb.InterruptException:
                raise QueryTimeout(
                    f"A query on {self.path} took longer than {self.query_timeout:.0f}s and was stopped; "
                    "narrow the time range."
                ) from None
            except duckdb.Error as exc:
                raise corrupt(self.path, exc) or exc  # noqa: B904 (the error itself, or one that names it and keeps it as its context)
            finally:
                timer.cancel()
                _turns_on(self.path).reader.close(con)

    def migrate(self) -> None:
        self.write(lambda con: None)

    def checkpoint(self) -> None:
        """Write the WAL into the file and give freed blocks back (after retention deleted rows);
        outside any transaction, as DuckDB requires."""
        with self._turn(writing=True):
            con = self._connect(read_only=False)
            try:
                con.execute("CHECKPOINT")
            except duckdb.Error as exc:
                raise _disk_full(self.path, exc) or corrupt(self.path, exc) or exc  # noqa: B904 (the error itself, or one that names it and keeps it as its context)
            finally:
                _close(self._host, con, committed=False)

    def check(self) -> None:
        """At startup: the file can be used (created and brought to this schema if it is new), or a
        StoreError says why not, before anything else is started."""
        self.migrate()

    def check_readable(self) -> None:
        """For readers, which never create the file: a file that exists can be opened."""
        if self.path.exists():
            self.read(lambda con: None)

    def _refuse_newer(self, con: duckdb.DuckDBPyConnection) -> None:
        """A long-running writer migrated the file once, at its first write; a newer jetwatch may
        have upgraded it since (a dashboard restarted with the new release while the old collector
        runs). Writing into a schema this code does not know would fail half-way or, worse, succeed
        with columns left empty: every write checks first, for the price of one tiny read."""
        latest = sql.schema_version()
        have = con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0]
        if have is not None and have > latest:
            raise StoreTooNew(
                f"The store {self.path} was upgraded to schema version {have} by a newer jetwatch while "
                f"this one (schema {latest}) was running; nothing was written. Restart this process "
                "with the newer release.")

    def _migrate(self, con: duckdb.DuckDBPyConnection) -> None:
        """Bring the file to this code's schema: every missing step, then the views, all in one
        transaction, so a step that fails leaves the file exactly as it was."""
        steps = sql.migrations()
        latest = steps[-1].number
        con.execute("BEGIN TRANSACTION")
        step = None
        try:
            con.execute("CREATE TABLE IF NOT EXISTS schema_version "
                        "(version INTEGER NOT NULL, applied_at TIMESTAMPTZ NOT NULL)")
            have = one_row(con.execute("SELECT coalesce(max(version), 0) FROM schema_version"))[0]
            if have > latest:
                raise StoreTooNew(
                    f"The store {self.path} has schema version {have}, newer than this jetwatch knows "
                    f"({latest}): it was written by a newer release. Upgrade jetwatch, or point --db at "
                    "another file; nothing was changed.")
            for step in steps[have:]:
                con.execute(step.text)
                con.execute("INSERT INTO schema_version VALUES (?, ?)", [step.number, utcnow()])
            step = None
            con.execute(sql.views())
            con.execute("COMMIT")
        except duckdb.Error as exc:
            con.execute("ROLLBACK")
            where = f"step {step.number} ({step.name})" if step else "the views"
            raise StoreError(
                f"Upgrading the store {self.path} to schema version {latest} failed at {where}: {' '.join(str(exc).split())} "
                "Nothing was changed: the file is as it was. Report this with the message above.") from None
        except BaseException:
            con.execute("ROLLBACK")
            raise
        self._migrated = True

    def query(self, name: str, params: Sequence[Any] | dict[str, Any] = ()) -> pd.DataFrame:
        """One named query from sql/queries as a DataFrame."""
        text = sql.query(name)
        return self.read(lambda con: con.execute(text, params).df())

    def rows(self, name: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        """One named query's rows as dicts, read without pandas (DuckDB's own Python values): for
        the commands a scheduler runs every minute, which must answer at once."""
        text = sql.query(name)

        def run(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
            cursor = con.execute(text, params)
            names = [d[0] for d in cursor.description or ()]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

        return self.read(run)

    def queries(self, calls: Sequence[tuple[str, Sequence[Any] | dict[str, Any]]],
                arrow: Sequence[str] = (),
                stage: Sequence[tuple[str, Sequence[Any] | dict[str, Any]]] = ()) -> list[Any]:
        """Several named queries on one connection: one page's worth of reads. Those named in
        `arrow` come back as Arrow tables (large inputs to more SQL: no pandas objects made).
        `stage` runs first and returns nothing: temp views and variables the calls read."""
        staged = [(sql.query(name), params) for name, params in stage]
        texts = [(name, sql.query(name), params) for name, params in calls]

        def run(con: duckdb.DuckDBPyConnection) -> list[Any]:
            for text, params in staged:
                con.execute(text, params)
            return [con.sql(t, params=p).to_arrow_table() if n in arrow else con.execute(t, p).df()
                    for n, t, p in texts]

        return self.read(run)
