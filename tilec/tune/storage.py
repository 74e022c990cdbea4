"""Opening the optuna storage of tuning studies, refusing what is not one before anything writes to it.

A storage is an SQLAlchemy URL: `sqlite:///path/to/file.db`, `postgresql://user:password@host/db`
or `mysql://...`. Before optuna sees it (optuna creates its tables in whatever database it is
given), `check_storage` decides, and says in an `ArgumentError` what is wrong and what would be
right:

- a string that is not a URL, or names another kind of database, is refused;
- SQLite: a directory, a missing directory, an in-memory database, a file that is not SQLite
  (random bytes), a damaged one (SQLite's own `PRAGMA quick_check` finds fault with it), or the
  database of something else is refused; the file is only opened read-only to look, so it is never
  modified;
- PostgreSQL/MySQL: the server is reached within `CONNECT_TIMEOUT` seconds (a server that does not
  answer is an error, not a hang of minutes), and the database of something else is refused the same
  way. A plain `postgresql://` URL uses psycopg2 when psycopg (3, SQLAlchemy 2.1's default driver) is
  not installed.

"The database of something else" has tables, none of them optuna's, or a table named like one of
optuna's (`studies`, `trials`, ...) without the columns optuna's models give it: optuna would add its
tables next to another program's and then fail on the first query.

What optuna reads back can still be damaged where SQLite sees nothing wrong (a study whose params were
edited by hand: an index past a knob's choices, JSON that is not JSON): `unreadable_study` turns
optuna's failure into an `ArgumentError` that names the study, the storage and the way out
(`tilec forget`, `tilec tune --fresh`, or moving the file aside), with optuna's exception chained.

`open_for_reading` opens a storage for commands that only look (`tilec show`): a SQLite file
read-only (`mode=ro`: SQLite itself refuses every write), without creating optuna's tables, and not
at all when there is nothing to read (no file, an empty file, a database without tables).
`drop_study` removes one study with optuna's own `delete_study` and says what it removed and what
remains (`tc.forget`, `tilec forget`, `tilec tune --fresh`).

`make_storage` then opens an `optuna.storages.RDBStorage` with heartbeats. On SQLite every
transaction starts with `BEGIN IMMEDIATE`: by default Python's sqlite3 reads outside transactions,
so two processes could both pop one enqueued (WAITING) trial and run it twice; with the write lock
taken first, popping a trial is atomic, as PostgreSQL's row locks make it there.

The storage is a `HeartbeatStorage`: a trial's first heartbeat is written as soon as it starts
running, not when optuna's heartbeat thread gets to it, and a running trial that never beat (its
worker died between starting it and the first beat) is stale after `BEATLESS_LIMIT` seconds.
Optuna alone never fails such a trial: it stayed RUNNING for ever.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import optuna
from optuna.storages._rdb import models

from tilec.errors import ArgumentError, TilecError

CONNECT_TIMEOUT = 10          # seconds to reach a database server
SQLITE_BUSY_TIMEOUT = 60      # seconds a SQLite writer waits for the lock
# optuna's tables and the columns its models give them (alembic's table records the schema's version)
OPTUNA_COLUMNS = {t.name: {c.name for c in t.columns} for t in models.BaseModel.metadata.sorted_tables}
OPTUNA_TABLES = set(OPTUNA_COLUMNS) | {"alembic_version"}
BEATLESS_LIMIT = 2 * SQLITE_BUSY_TIMEOUT  # seconds (beyond the grace period) a beatless running trial lives
EXAMPLES = "sqlite:///path/to/tuning.db (a file) or postgresql://user:password@host:5432/db"


def default_storage() -> str:
    """SQLite under $TILEC_CACHE_DIR (default ~/.cache/tilec)."""
    d = Path(os.environ.get("TILEC_CACHE_DIR", Path.home() / ".cache" / "tilec"))
    d.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{d / 'tuning.db'}"


def _shown(url) -> str:
    """The URL for messages, without its password."""
    try:
        return url.render_as_string(hide_password=True)
    except AttributeError:
        return str(url)


def parse_url(url, resolve: bool = True):
    """The sqlalchemy URL of `url`, or an ArgumentError saying what a storage URL looks like.
    `resolve`: with the PostgreSQL driver that is installed."""
    import sqlalchemy.engine
    import sqlalchemy.exc
    if not isinstance(url, str) or not url.strip():
        raise ArgumentError(f"storage must be a database URL string, e.g. {EXAMPLES}; got {url!r}")
    try:
        u = sqlalchemy.engine.make_url(url)
        backend = u.get_backend_name()
    except (sqlalchemy.exc.ArgumentError, ValueError) as e:
        raise ArgumentError(f"storage {url!r} is not a database URL ({str(e).splitlines()[0]}); expected "
                            f"{EXAMPLES}") from None
    if backend not in ("sqlite", "postgresql", "mysql"):
        raise ArgumentError(f"storage {_shown(u)}: tilec keeps studies in SQLite, PostgreSQL or MySQL, not "
                            f"{backend!r}; expected {EXAMPLES}")
    if resolve and u.drivername == "postgresql" and not _importable("psycopg") and _importable("psycopg2"):
        u = u.set(drivername="postgresql+psycopg2")  # SQLAlchemy 2.1's default is psycopg 3; use what is here
    return u


def _importable(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def _foreign(tables: dict[str, set[str]], where: str) -> None:
    """Refuse the database of something else: `tables` (name -> its columns) has tables, none of them
    optuna's, or one named like optuna's without the columns optuna gives it. Some of optuna's tables
    and not all is a storage, maybe being created by another worker."""
    fix = "tilec leaves it untouched. Give a new file or database for tuning, e.g. sqlite:///tuning.db"
    if tables and not set(tables) & OPTUNA_TABLES:
        shown = ", ".join(sorted(tables)[:8]) + (", ..." if len(tables) > 8 else "")
        raise ArgumentError(f"{where} is the database of something else (its tables: {shown}; no optuna "
                            f"study tables); {fix}")
    if {"version_info", "alembic_version", "studies", "trials"} <= set(tables):
        return  # optuna's, of another version: optuna's own check says so (and how to upgrade) when it opens it
    for name, columns in sorted(tables.items()):
        missing = OPTUNA_COLUMNS.get(name, set()) - columns
        if missing:
            raise ArgumentError(f"{where} is the database of something else: its table {name} has the columns "
                                f"{', '.join(sorted(columns))}, without optuna's {', '.join(sorted(missing))}; "
                                f"{fix} (a study file of an older optuna would be upgraded with `optuna storage "
                                f"upgrade --storage URL`)")


def _damaged(shown: str, p: Path, what: str) -> ArgumentError:
    return ArgumentError(f"storage {shown}: {p} is damaged {what}; tilec leaves it untouched: move it aside "
                         f"(mv {p} {p}.damaged, with any {p.name}-journal or {p.name}-wal beside it) and tune "
                         f"into a new file, or restore it from a backup")


def _sqlite_tables(p: Path, writable: bool = False) -> tuple[dict[str, set[str]], list[str]]:
    """A SQLite file's tables (name -> its columns) and what `PRAGMA quick_check` says of it (["ok"]
    when SQLite finds nothing wrong), read through a read-only connection (`writable`: a read-write one,
    through which SQLite rolls back the unfinished write of a process that stopped); sqlite3.Error where
    SQLite cannot read the file at all."""
    mode = "" if writable else "?mode=ro"
    con = sqlite3.connect(f"file:{quote(str(p.resolve()))}{mode}", uri=True, timeout=SQLITE_BUSY_TIMEOUT)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        tables = {n: {r[0] for r in con.execute("SELECT name FROM pragma_table_info(?)", (n,))} for n in names}
        try:
            check = [r[0] for r in con.execute("PRAGMA quick_check(3)")]
        except sqlite3.DatabaseError as e:  # damage that stops the check itself: "database disk image is malformed"
            check = [str(e)]
    finally:
        con.close()
    return tables, check


def _unfinished_or_damaged(shown: str, p: Path, e: sqlite3.Error, create: bool):
    """Where a read-only look at `p` failed: a file that another process holds locked, or that holds the
    unfinished write of a process that stopped (its rollback journal or write-ahead log beside it, which only
    a writer can roll back), is not damaged, and moving it without that file would lose what it holds.
    A writer (`create`) looks again read-write, and SQLite rolls the unfinished write back; a reader says
    what to do. Anything else is damage."""
    text = str(e)
    if "locked" in text or "busy" in text:
        raise ArgumentError(f"storage {shown}: {p} is locked by another process (sqlite: {text}) for more than "
                            f"{SQLITE_BUSY_TIMEOUT:.0f} s; tilec leaves it untouched: let that process finish, or "
                            f"stop it, and run this again") from None
    journals = [j for j in (Path(f"{p}-journal"), Path(f"{p}-wal")) if j.exists()]
    if not journals:
        raise _damaged(shown, p, f"or not a SQLite database (sqlite: {text})") from None
    if not create:
        raise ArgumentError(f"storage {shown}: {p} holds the unfinished write of a process that stopped "
                            f"({journals[0].name} beside it), which only a writer can roll back, and this "
                            f"command only reads; the next `tilec tune` on it rolls it back (keep the file and "
                            f"its {journals[0].name} together)") from None
    try:
        return _sqlite_tables(p, writable=True)
    except sqlite3.Error as again:
        raise _damaged(shown, p, f"or not a SQLite database (sqlite: {again})") from None


def _look_sqlite(u, create: bool) -> dict[str, set[str]] | None:
    """Check a SQLite storage without writing to it; its tables, or None when the file does not exist."""
    shown = _shown(u)
    if u.database in (None, "", ":memory:") or str(u.database).startswith("file::memory:"):
        raise ArgumentError(f"storage {shown} is an in-memory database: its study would vanish when tilec "
                            f"exits, and worker processes could not share it; give a file, e.g. "
                            f"sqlite:///tuning.db")
    p = Path(u.database)
    if p.is_dir():
        raise ArgumentError(f"storage {shown} names a directory ({p}); give a file in it, e.g. "
                            f"sqlite:///{p / 'tuning.db'}")
    if not p.exists():
        if create and not p.parent.is_dir():
            raise ArgumentError(f"storage {shown}: the directory {p.parent} does not exist; create it, or give "
                                f"a file in an existing directory")
        return None
    if not p.is_file():
        raise ArgumentError(f"storage {shown} names {p}, which is not a regular file; give a SQLite file")
    with open(p, "rb") as f:
        head = f.read(16)
    if head and head != b"SQLite format 3\x00":
        raise ArgumentError(f"storage {shown}: {p} is not a SQLite database (it does not start with SQLite's "
                            f"header); tilec leaves it untouched. Give a new file name, or the file of a "
                            f"tuning study")
    tables: dict[str, set[str]] = {}
    if head:  # (an empty file is an empty database)
        try:
            tables, check = _sqlite_tables(p)
        except sqlite3.Error as e:
            tables, check = _unfinished_or_damaged(shown, p, e, create)
        if check != ["ok"]:
            raise _damaged(shown, p, f"(SQLite's quick_check: {'; '.join(' '.join(c.split()) for c in check)[:300]})")
        _foreign(tables, f"storage {shown} ({p})")
    if create and not os.access(p, os.W_OK):
        raise ArgumentError(f"storage {shown}: {p} is not writable; give a file you can write")
    return tables


def _look_server(u, shown: str) -> dict[str, set[str]]:
    """Reach a PostgreSQL/MySQL server within CONNECT_TIMEOUT and look at its tables (read only)."""
    import sqlalchemy
    import sqlalchemy.exc
    import sqlalchemy.pool
    try:
        engine = sqlalchemy.create_engine(u, poolclass=sqlalchemy.pool.NullPool,
                                          connect_args={"connect_timeout": CONNECT_TIMEOUT})
    except ImportError as e:
        raise ArgumentError(f"storage {shown} needs a database driver that is not installed ({e}); for "
                            f"PostgreSQL: pip install psycopg2-binary (pip install -e \".[postgres]\")") from None
    try:
        with engine.connect() as c:
            inspector = sqlalchemy.inspect(c)
            tables = {n: {col["name"] for col in inspector.get_columns(n)} if n in OPTUNA_TABLES else set()
                      for n in inspector.get_table_names()}
    except sqlalchemy.exc.SQLAlchemyError as e:
        reason = " ".join(str(getattr(e, "orig", None) or e).split())[:300]
        raise ArgumentError(f"cannot connect to storage {shown} within {CONNECT_TIMEOUT} s: {reason}; is the "
                            f"server running, and is the URL right (postgresql://user:password@host:5432/db)?") from None
    finally:
        engine.dispose()
    _foreign(tables, f"storage {shown}")
    return tables


def _look(url: str, create: bool) -> dict[str, set[str]] | None:
    """`check_storage`, returning the storage's tables (None where a SQLite file does not exist)."""
    u = parse_url(url)
    if u.get_backend_name() == "sqlite":
        return _look_sqlite(u, create)
    return _look_server(u, _shown(parse_url(url, resolve=False)))


def check_storage(url: str, create: bool = True) -> bool:
    """Refuse a storage that is not one (see the module docstring). False when a SQLite file does not
    exist yet (it would be created)."""
    return _look(url, create) is not None


def _begin_immediate(storage) -> None:
    """SQLite: take the write lock when a transaction begins, so that reading a WAITING trial and
    claiming it are one atomic step (see the module docstring)."""
    from sqlalchemy import event

    @event.listens_for(storage.engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _scoped(storage):
    from optuna.storages._rdb.storage import _create_scoped_session
    return _create_scoped_session(storage.scoped_session)


class HeartbeatStorage(optuna.storages.RDBStorage):
    """An RDBStorage whose running trials always have a heartbeat, so a dead worker's trial is found.

    Optuna's stale-trial check skips trials with no heartbeat row, and the row only appears when the
    heartbeat thread first runs, after `study.ask()` has done its writes: a worker killed in that
    window left its trial RUNNING for ever. Here the first beat is written right after the trial
    starts (created running, or popped from the queue), and a trial that still has none after the
    grace period plus `BEATLESS_LIMIT` (a live worker can wait that long for a busy database between
    the two writes) is stale as well.
    """

    def _create_new_trial(self, study_id, template_trial=None):  # what optuna's cache calls
        frozen = super()._create_new_trial(study_id, template_trial)
        if frozen.state == optuna.trial.TrialState.RUNNING:
            self.record_heartbeat(frozen._trial_id)
        return frozen

    def set_trial_state_values(self, trial_id, state, values=None):
        changed = super().set_trial_state_values(trial_id, state, values)
        if changed and state == optuna.trial.TrialState.RUNNING:
            self.record_heartbeat(trial_id)
        return changed

    def _get_stale_trial_ids(self, study_id):
        import datetime

        from optuna.storages._rdb import models
        stale = super()._get_stale_trial_ids(study_id)
        limit = datetime.timedelta(seconds=(self.grace_period or 2 * self.heartbeat_interval) + BEATLESS_LIMIT)
        now = datetime.datetime.now()  # datetime_start is written from the worker's clock, as here
        with _scoped(self) as session:
            running = (session.query(models.TrialModel)
                       .filter(models.TrialModel.state == optuna.trial.TrialState.RUNNING)
                       .filter(models.TrialModel.study_id == study_id).all())
            for t in running:
                if not t.heartbeats and t.datetime_start is not None and now - t.datetime_start > limit:
                    stale.append(t.trial_id)
        return stale


def make_storage(url: str, heartbeat: int = 2, create: bool = True):
    """An optuna RDB storage with heartbeats, after `check_storage`: the trial of a worker that died
    is marked failed after 3 missed beats and retried once by whoever runs next."""
    import sqlalchemy.exc
    if isinstance(heartbeat, bool) or not isinstance(heartbeat, int) or heartbeat < 1:
        raise ArgumentError(f"heartbeat must be a positive int (seconds), got {heartbeat!r}")
    check_storage(url, create)
    shown = _shown(parse_url(url, resolve=False))
    u = parse_url(url)
    url = u.render_as_string(hide_password=False)  # with the driver that is installed (parse_url)
    sqlite = u.get_backend_name() == "sqlite"
    if sqlite:  # autocommit at the driver; transactions are begun by _begin_immediate
        engine_kwargs = {"connect_args": {"isolation_level": None, "timeout": SQLITE_BUSY_TIMEOUT}}
    else:
        engine_kwargs = {"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT}}
    for attempt in range(5):  # workers starting together race to create the tables: the loser retries
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # heartbeats are "experimental" in optuna 5 (since 2.8)
                storage = HeartbeatStorage(
                    url, heartbeat_interval=heartbeat, grace_period=3 * heartbeat,
                    heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1),
                    engine_kwargs=engine_kwargs)
            if sqlite:
                _begin_immediate(storage)
            return storage
        except sqlalchemy.exc.SQLAlchemyError as e:
            if attempt == 4:
                raise ArgumentError(f"storage {shown} cannot be opened as an optuna storage: "
                                    f"{' '.join(str(e).split())[:300]}") from None
            time.sleep(0.2 * (attempt + 1))
        except RuntimeError as e:  # optuna: the tables were written by an incompatible optuna version
            raise ArgumentError(f"storage {shown}: {' '.join(str(e).split())[:400]}") from None


# -- reading a study, and dropping one ---------------------------------------------------------------

UNREADABLE = (optuna.exceptions.StorageInternalError, LookupError, ValueError)  # what optuna raises on damaged rows


def forget_hint(url: str, name: str) -> str:
    """The command that drops study `name` from `url`, for messages."""
    return f"tilec forget --storage {_shown(parse_url(url, resolve=False))} --study {name}"


@contextlib.contextmanager
def unreadable_study(url: str, name: str):
    """Turn optuna's failure to read study `name` (a trial edited by hand, damage SQLite does not see)
    into an ArgumentError naming the study, the storage and the way out; optuna's exception stays
    chained. tilec's own errors pass through."""
    try:
        yield
    except TilecError:
        raise
    except UNREADABLE as e:
        shown = _shown(parse_url(url, resolve=False))
        what = " ".join(str(e).split())[:200]
        raise ArgumentError(f"study {name} in {shown} cannot be read: a stored trial is damaged or was edited by "
                            f"hand ({type(e).__name__}: {what}); tilec leaves it untouched. Drop the study with "
                            f"{forget_hint(url, name)} (or tilec tune ... --fresh, or tc.forget(storage=..., "
                            f"study_name=...)), or move the file aside") from e


def open_for_reading(url: str):
    """An optuna storage for a command that only looks, or None where there is nothing to read (no file,
    an empty file, a database without tables). Checked first (`check_storage`); a SQLite file is opened
    read-only (`mode=ro`), and optuna's tables are never created."""
    import sqlalchemy.exc
    tables = _look(url, create=False)
    if not tables:
        return None
    shown = _shown(parse_url(url, resolve=False))
    u = parse_url(url)
    if u.get_backend_name() == "sqlite":
        # a connection of our own, not a URL of one: SQLAlchemy would decode the path (a `#` or `%` in it) before
        # SQLite reads it as a URI, which drops `mode=ro` and opens another file read-write
        uri = f"file:{quote(str(Path(u.database).resolve()))}?mode=ro"
        ro = "sqlite://"
        engine_kwargs = {"creator": lambda: sqlite3.connect(uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT,
                                                             check_same_thread=False)}
    else:
        ro = u.render_as_string(hide_password=False)
        engine_kwargs = {"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT}}
    try:
        return optuna.storages.RDBStorage(ro, engine_kwargs=engine_kwargs, skip_table_creation=True)
    except RuntimeError as e:  # optuna: the tables were written by an incompatible optuna version
        raise ArgumentError(f"storage {shown}: {' '.join(str(e).split())[:400]}") from None
    except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as e:
        raise ArgumentError(f"storage {shown} cannot be read as an optuna storage ({type(e).__name__}: "
                            f"{' '.join(str(e).split())[:200]}); tilec leaves it untouched") from e


def nothing_to_read(url: str) -> str:
    """Why `open_for_reading` found nothing to read in `url`."""
    return "it holds no optuna tables" if check_storage(url, create=False) else "the file does not exist"


def study_names(store) -> list[str]:
    """The names of the studies in an opened storage (None: nothing to read), in the order optuna lists them."""
    return [] if store is None else [s.study_name for s in store.get_all_studies()]


def names_text(names: list[str]) -> str:
    return ", ".join(names[:10]) + (", ..." if len(names) > 10 else "") if names else "none"


@dataclass(frozen=True)
class Forgotten:
    """What `tc.forget` removed: the study's name, its storage (shown without a password), how many of
    its trials were in each state, and the names of the studies that remain in the storage. Prints as
    one line saying all of it."""

    study: str
    storage: str
    trials: dict[str, int]
    remaining: tuple[str, ...]

    @property
    def n_trials(self) -> int:
        return sum(self.trials.values())

    def __str__(self) -> str:
        n = self.n_trials
        states = ", ".join(f"{k} {s.lower()}" for s, k in sorted(self.trials.items(), key=lambda sk: -sk[1]))
        others = len(self.remaining)
        left = (f"{others} other stud{'y' if others == 1 else 'ies'} ({names_text(list(self.remaining))})" if others
                else "no other study")
        return (f"forgot study {self.study} in {self.storage}: removed its {n} trial{'s' * (n != 1)}"
                f"{f' ({states})' if states else ''}; the storage holds {left}")


def drop_study(url: str, name: str, missing_ok: bool = False) -> Forgotten | None:
    """Remove study `name` and its trials from `url` with optuna's `delete_study`; what was removed. A study
    that is not there: None with `missing_ok`, else an ArgumentError saying so (and which studies there
    are). Nothing is created or written where the study is not there."""
    shown = _shown(parse_url(url, resolve=False))
    reader = open_for_reading(url)
    try:
        names = study_names(reader)
    finally:
        if reader is not None:
            reader.engine.dispose()
    if name not in names:
        if missing_ok:
            return None
        where = f"its studies: {names_text(names)}" if reader is not None else nothing_to_read(url)
        raise ArgumentError(f"forget: no study {name} in {shown} ({where}); nothing was removed")
    store = make_storage(url, create=False)
    try:
        study_id = store.get_study_id_from_name(name)
        trials = _trial_states(store, study_id)
        optuna.delete_study(study_name=name, storage=store)
        remaining = tuple(study_names(store))
    finally:
        store.engine.dispose()
    return Forgotten(name, shown, trials, remaining)


def _trial_states(store, study_id: int) -> dict[str, int]:
    """How many trials of the study are in each state, counted without reading the trials (which may be
    the damage that the study is dropped for)."""
    import sqlalchemy
    with _scoped(store) as session:
        rows = (session.query(models.TrialModel.state, sqlalchemy.func.count(models.TrialModel.trial_id))
                .filter(models.TrialModel.study_id == study_id).group_by(models.TrialModel.state).all())
    return {state.name: n for state, n in rows}
