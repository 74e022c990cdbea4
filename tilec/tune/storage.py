"""Opening the optuna storage of tuning studies, refusing what is not one before anything writes to it.

A storage is an SQLAlchemy URL: `sqlite:///path/to/file.db`, `postgresql://user:password@host/db`
or `mysql://...`. Before optuna sees it (optuna creates its tables in whatever database it is
given), `check_storage` decides, and says in an `ArgumentError` what is wrong and what would be
right:

- a string that is not a URL, or names another kind of database, is refused;
- SQLite: a directory, a missing directory, an in-memory database, a file that is not SQLite
  (random bytes), a damaged one, or the database of something else (tables, none of them optuna's)
  is refused; the file is only opened read-only to look, so it is never modified;
- PostgreSQL/MySQL: the server is reached within `CONNECT_TIMEOUT` seconds (a server that does not
  answer is an error, not a hang of minutes), and a database holding other tables but not optuna's
  is refused the same way. A plain `postgresql://` URL uses psycopg2 when psycopg (3, SQLAlchemy
  2.1's default driver) is not installed.

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

import os
import sqlite3
import time
import warnings
from pathlib import Path
from urllib.parse import quote

import optuna

from tilec.errors import ArgumentError

CONNECT_TIMEOUT = 10          # seconds to reach a database server
SQLITE_BUSY_TIMEOUT = 60      # seconds a SQLite writer waits for the lock
OPTUNA_TABLES = {"studies", "study_directions", "study_system_attributes", "study_user_attributes",
                 "trial_heartbeats", "trial_intermediate_values", "trial_params", "trial_system_attributes",
                 "trial_user_attributes", "trial_values", "trials", "version_info", "alembic_version"}
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


def _foreign(tables: set[str], where: str) -> None:
    if tables and not tables & OPTUNA_TABLES:  # (some optuna tables: a storage, maybe being created)
        shown = ", ".join(sorted(tables)[:8]) + (", ..." if len(tables) > 8 else "")
        raise ArgumentError(f"{where} is the database of something else (its tables: {shown}; no optuna "
                            f"study tables); tilec leaves it untouched. Give a new file or database for "
                            f"tuning, e.g. sqlite:///tuning.db")


def _check_sqlite(u, create: bool) -> bool:
    """Check a SQLite storage without writing to it; False when the file does not exist."""
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
        return False
    if not p.is_file():
        raise ArgumentError(f"storage {shown} names {p}, which is not a regular file; give a SQLite file")
    with open(p, "rb") as f:
        head = f.read(16)
    if head and head != b"SQLite format 3\x00":
        raise ArgumentError(f"storage {shown}: {p} is not a SQLite database (it does not start with SQLite's "
                            f"header); tilec leaves it untouched. Give a new file name, or the file of a "
                            f"tuning study")
    if head:
        try:
            con = sqlite3.connect(f"file:{quote(str(p.resolve()))}?mode=ro", uri=True, timeout=5)
            try:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            finally:
                con.close()
        except sqlite3.Error as e:
            raise ArgumentError(f"storage {shown}: {p} is damaged or not a SQLite database (sqlite: {e}); "
                                f"tilec leaves it untouched. Give a new file name") from None
        _foreign(tables, f"storage {shown} ({p})")
    if create and not os.access(p, os.W_OK):
        raise ArgumentError(f"storage {shown}: {p} is not writable; give a file you can write")
    return True


def _check_server(u, shown: str) -> None:
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
            tables = set(sqlalchemy.inspect(c).get_table_names())
    except sqlalchemy.exc.SQLAlchemyError as e:
        reason = " ".join(str(getattr(e, "orig", None) or e).split())[:300]
        raise ArgumentError(f"cannot connect to storage {shown} within {CONNECT_TIMEOUT} s: {reason}; is the "
                            f"server running, and is the URL right (postgresql://user:password@host:5432/db)?") from None
    finally:
        engine.dispose()
    _foreign(tables, f"storage {shown}")


def check_storage(url: str, create: bool = True) -> bool:
    """Refuse a storage that is not one (see the module docstring). False when a SQLite file does not
    exist yet (it would be created)."""
    u = parse_url(url)
    if u.get_backend_name() == "sqlite":
        return _check_sqlite(u, create)
    _check_server(u, _shown(parse_url(url, resolve=False)))
    return True


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
