"""A derived, rebuildable index of the log for history and forensics: who, what resource, when.

    DIR/history/index.sqlite    events: one row per logged event (offset, time, actor,
                                type, entity, the subject principal (an ACL's, or
                                User:<scram user>), the ACL's seven fields, the token's
                                parties, the redacted payload); parties: (party, offset)
                                for every token event, derived from the events rows

The log stays the only source of truth: the index is rebuilt from it whenever
it is missing, stale (its recorded end and chain link do not fit the log),
truncated or tampered with.  It is authenticated as snapshots are: a keyed
BLAKE2b digest is chained over the rows in offset order, one link per block of
1,024 rows, and the meta row (store id, start and end offsets, the log's chain
link there, the digest) carries an HMAC under the keyring's chain key; the
parties table must be exactly what the rows derive.  ``open`` checks every row
(in the background) before anything is served, with the schema (a planted trigger
or an altered index is refused) and SQLite's integrity check (every secondary
index entry must match its row); a bad file is reported once, deleted and
rebuilt.  A clean close leaves a keyed MAC of the file's bytes beside it
(``.mac``), so the next open of an unchanged file checks only its meta row; the
MAC is consumed at open.  ``log verify`` leaves a ``.bad`` note beside a file it
finds wrong: the next open rebuilds it and no close seals it.  Until the index is ready, callers scan the
log (``ready`` is False).  A fresh build loads the rows first and creates the
secondary indexes once, at the end.

SQLite (standard library) was chosen over a pyarrow columnar file because the
index grows by appends (one small transaction per catch-up) and answers point
lookups by principal, user and resource through B-tree indexes; a columnar
file would be rewritten or fragmented on every append.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import marshal
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from secmeta.core.log import Log
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    DelegationTokenIssued,
    Envelope,
    ScramCredentialDeleted,
    ScramCredentialUpserted,
)
from secmeta.events.redact import redacted
from secmeta.events.types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["HistoryIndex", "IndexedEvent", "acls", "condemn", "index_problem", "net_acls", "token_parties"]

logger = logging.getLogger("secmeta.history_index")
INDEX_DIR = "history"
INDEX_FILE = "index.sqlite"
INDEX_FORMAT = 4
_MAC_LABEL = b"secmeta/history-index"
_CHUNK = 100_000  # rows per transaction
_BLOCK = 1024  # rows per link of the digest chain
_SEAL_SUFFIX = ".mac"  # beside the file: its keyed digest, written at a clean close
_CONDEMNED_SUFFIX = ".bad"  # beside the file: why log verify found it wrong (the next open rebuilds it)
_CACHE_KB = 65_536
_ACL_EVENTS = {"AclCreated": AclCreated, "AclDeleted": AclDeleted}
_COLUMNS = ("offset", "ts", "actor", "host", "request", "type", "entity", "principal", "restype", "pattern",
            "name", "acl_host", "op", "perm", "parties", "payload")
_PARTIES = _COLUMNS.index("parties")
_compact_json = json.JSONEncoder(separators=(",", ":")).encode
# The tables; a fresh build fills them first and adds the secondary indexes once (sorting
# a million keys at the end is several times cheaper than keeping five B-trees up per row).
_TABLES = f"""
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events ({_COLUMNS[0]} INTEGER PRIMARY KEY, {", ".join(_COLUMNS[1:])});
CREATE TABLE IF NOT EXISTS parties (party TEXT NOT NULL, offset INTEGER NOT NULL, PRIMARY KEY (party, offset))
    WITHOUT ROWID;
"""
# by_entity holds the SCRAM and token rows only (ask it with 'restype IS NULL'); by_resource the ACL rows.
_INDEXES = """
CREATE INDEX IF NOT EXISTS by_actor ON events(actor, offset);
CREATE INDEX IF NOT EXISTS by_principal ON events(principal, offset);
CREATE INDEX IF NOT EXISTS by_resource ON events(restype, name, offset) WHERE restype IS NOT NULL;
CREATE INDEX IF NOT EXISTS by_entity ON events(entity, offset) WHERE restype IS NULL;
"""
_SCHEMA = "SELECT type, name, tbl_name, sql FROM sqlite_schema"


def _schema_of(script: str) -> frozenset[tuple]:
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(script)
        return frozenset(db.execute(_SCHEMA))
    finally:
        db.close()


# what sqlite_schema holds: the tables alone (a build interrupted before its indexes), or with them
_EXPECTED_SCHEMAS = (_schema_of(_TABLES), _schema_of(_TABLES + _INDEXES))


@dataclass(frozen=True, slots=True)
class IndexedEvent:
    """One indexed row: the envelope's attribution, what it touched and its redacted payload."""

    offset: int
    timestamp_ms: int
    actor_principal: str
    actor_host: str
    request_id: str
    event_type: str
    entity_key: str
    binding: AclBinding | None
    payload: dict

    @property
    def acl_id(self) -> str | None:
        return self.entity_key.split(":", 1)[1] if self.binding is not None else None


def _row(envelope: Envelope, parties: dict[str, tuple[str, ...]]) -> tuple:
    event = envelope.event
    kind = type(event)
    if kind is AclCreated or kind is AclDeleted:  # most rows: their payload is their columns
        p, e = event.binding.pattern, event.binding.entry
        return (envelope.offset, envelope.timestamp_ms, envelope.actor_principal, envelope.actor_host,
                envelope.request_id, kind.__name__, event.entity_key, e.principal, p.resource_type.value,
                p.pattern_type.value, p.name, e.host, e.operation.value, e.permission_type.value, None, None)
    principal = None
    token_parties: tuple[str, ...] = ()
    if kind is ScramCredentialUpserted or kind is ScramCredentialDeleted:
        principal = f"User:{event.user}"
    else:
        if kind is DelegationTokenIssued:
            parties[event.token_id] = (event.owner, event.requester, *event.renewers)
        token_parties = parties.get(event.token_id, ())
    payload = _compact_json(redacted(envelope)["payload"])
    return (envelope.offset, envelope.timestamp_ms, envelope.actor_principal, envelope.actor_host,
            envelope.request_id, kind.__name__, event.entity_key, principal, None, None, None, None, None, None,
            json.dumps(token_parties) if token_parties else None, payload)


def _indexed(row: tuple) -> IndexedEvent:
    (offset, ts, actor, host, request, etype, entity, principal, restype, pattern, name, acl_host, op, perm,
     parties, payload) = row
    if restype is None:
        binding, payload = None, json.loads(payload)
    else:
        [(_, binding)] = acls([(None, None, restype, name, pattern, principal, acl_host, op, perm)])
        event = _ACL_EVENTS[etype](entity.split(":", 1)[1], binding)
        payload = redacted(Envelope(offset, ts, actor, host, request, event))["payload"]
    return IndexedEvent(offset, ts, actor, host, request, etype, entity, binding, payload)


class HistoryIndex:
    """The index of one store's log; ``ready`` once built or checked, then kept up to the log's end."""

    def __init__(self, log: Log, parties_at_start=None):
        self.log = log
        self.path = Path(log.store.path) / INDEX_DIR / INDEX_FILE
        self._key_id = log.keyring.newest_id
        self._key = hashlib.blake2b(log.keyring.chain_key(self._key_id), digest_size=32,
                                    person=b"secmeta-hindex").digest()
        self._parties_at_start = parties_at_start  # () -> {token_id: parties} alive at log.start_offset
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._start = self._end = 0  # the index holds rows [start, end)
        self._sealed = b""  # the digest over the full blocks of rows
        self._tail: list[tuple] = []  # the rows after them (fewer than a block)
        self._parties: dict[str, tuple[str, ...]] = {}
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.problem: str | None = None  # why the file on disk was rebuilt (reported once)
        self.rows_checked = False  # whether opening it checked every row (not a file unchanged since close)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, *, background: bool = True) -> None:
        """Check or rebuild the index, then catch up with the log (in a thread by default)."""
        if background:
            self._thread = threading.Thread(target=self._prepare_quietly, name="secmeta-history-index",
                                            daemon=True)
            self._thread.start()
        else:
            self._prepare()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the index is ready, waiting up to ``timeout`` for its build (False at once after a failed build)."""
        if self._thread is None:
            return self._ready.wait(timeout)
        self._thread.join(timeout)
        return self.ready

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def close(self) -> None:
        """Close the file; an index that was ready leaves its file's MAC beside it for the next open."""
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
                if self.ready and not self._condemned_path.exists():
                    tmp = Path(f"{self._seal_path}.tmp")
                    tmp.write_text(self._file_mac())
                    os.replace(tmp, self._seal_path)
            self._ready.clear()

    @property
    def _seal_path(self) -> Path:
        return Path(f"{self.path}{_SEAL_SUFFIX}")

    @property
    def _condemned_path(self) -> Path:
        return Path(f"{self.path}{_CONDEMNED_SUFFIX}")

    def _file_mac(self) -> str:
        """A keyed digest of the file's bytes (hashlib releases the GIL over large reads)."""
        mac = hashlib.blake2b(key=self._key, digest_size=32, person=b"secmeta-hfile")
        with open(self.path, "rb") as f:
            while chunk := f.read(1 << 20):
                mac.update(chunk)
        return mac.hexdigest()

    def _unchanged_since_close(self) -> bool:
        """Whether the file is byte for byte what a ready index left at close (its MAC is consumed either way)."""
        try:
            sealed = self._seal_path.read_text()
        except (OSError, UnicodeDecodeError):
            return False
        self._seal_path.unlink()  # before anything changes the file: a later crash leaves no stale MAC
        return hmac.compare_digest(sealed, self._file_mac())

    def _prepare_quietly(self) -> None:
        try:
            self._prepare()
        except Exception as exc:  # noqa: BLE001 - the index is optional: callers fall back to a log scan
            logger.warning("history index unavailable, history scans the log: %s", exc)

    def _prepare(self) -> None:
        with self._lock:
            problem = None
            if self._condemned_path.exists():
                problem = f"log verify found it wrong: {self._condemned_path.read_text(errors='replace')}"
            elif self.path.exists():
                # a file left as it was at a clean close needs its meta row checked, not every row again
                self.rows_checked = not self._unchanged_since_close()
                problem = index_problem(self.path, self.log, self._key_id, self._key, rows=self.rows_checked)
            if problem is not None:
                self.problem = problem
                logger.warning("history index %s ignored and rebuilt: %s", self.path, problem)
            if problem is not None or not self.path.exists():
                self._remove()
                self._open_db(fresh=True)
            else:
                self._open_db(fresh=False)
            self._catch_up()
            self._db.executescript(_INDEXES)  # after a fresh build's bulk load; present already otherwise
            self._ready.set()

    def _remove(self) -> None:
        for suffix in ("", "-journal", "-wal", "-shm", _SEAL_SUFFIX, _CONDEMNED_SUFFIX):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _open_db(self, *, fresh: bool) -> None:
        self.path.parent.mkdir(exist_ok=True)
        if fresh:  # built beside, sealed, then renamed in: the path never names an unsealed file
            tmp = Path(f"{self.path}.tmp")
            tmp.unlink(missing_ok=True)
            self._open_db_at(tmp, fresh=True)
            self._db.close()
            os.replace(tmp, self.path)
        self._open_db_at(self.path, fresh=False)

    def _open_db_at(self, path: Path, *, fresh: bool) -> None:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA synchronous=OFF")
        db.execute(f"PRAGMA cache_size=-{_CACHE_KB}")
        db.executescript(_TABLES)
        self._db = db
        if fresh:
            self._start = self._end = self.log.start_offset
            self._sealed, self._tail = b"", []
            self._parties = dict(self._parties_at_start()) if self.log.start_offset and self._parties_at_start \
                else {}
            # Sealed at once, covering nothing yet: a build that is interrupted (a short-lived
            # process closing before the background catch-up) leaves a valid, shorter index.
            self._write(db, [], self._sealed, self._tail)
        else:
            meta = dict(db.execute("SELECT k, v FROM meta"))
            self._start, self._end = int(meta["start"]), int(meta["end"])
            self._sealed = bytes.fromhex(meta["sealed"])
            tail_start = self._end - (self._end - self._start) % _BLOCK
            self._tail = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM events WHERE offset >= ? ORDER BY offset",
                                    (tail_start,)).fetchall()
            self._parties = {k: tuple(v) for k, v in json.loads(meta["parties"]).items()}

    # -- keeping up with the log --------------------------------------------------------

    def catch_up(self) -> int:
        """Index the events appended since the last call; the offset the index now reaches."""
        with self._lock:
            if self._db is None:
                return self._end
            return self._catch_up()

    def _catch_up(self) -> int:
        end = self.log.end_offset
        if self._end >= end:
            return self._end
        db, sealed, tail, rows = self._db, self._sealed, list(self._tail), []
        for envelope in self.log.read(self._end, end, strict=True):
            row = _row(envelope, self._parties)
            rows.append(row)
            tail.append(row)
            if len(tail) == _BLOCK:
                sealed, tail = _chain(self._key, sealed, tail), []
            if len(rows) >= _CHUNK:
                self._write(db, rows, sealed, tail)
                rows = []
        if rows:
            self._write(db, rows, sealed, tail)
        return self._end

    def _write(self, db: sqlite3.Connection, rows: list[tuple], sealed: bytes, tail: list[tuple]) -> None:
        """Append ``rows`` and the meta row of the index they extend (full blocks' digest ``sealed``, then ``tail``)."""
        end = rows[-1][0] + 1 if rows else self._end
        link = self.log.link_at(end)
        meta = {"format": str(INDEX_FORMAT), "store_id": self.log.store.store_id, "end": str(end),
                "start": str(self._start),
                "link": link.hex() if link is not None else "", "sealed": sealed.hex(),
                "digest": _digest(self._key, sealed, tail).hex(),
                "parties": json.dumps(self._parties, separators=(",", ":"), sort_keys=True),
                "key_id": self._key_id}
        meta["mac"] = _meta_mac(self._key, meta)
        db.execute("BEGIN")
        try:
            db.executemany(f"INSERT INTO events VALUES ({', '.join('?' * len(_COLUMNS))})", rows)
            db.executemany("INSERT INTO parties VALUES (?, ?)", _party_rows(rows))
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # else every later BEGIN fails: the index could never catch up again
                db.execute("ROLLBACK")
            raise
        self._end, self._sealed, self._tail = end, sealed, tail[:]

    # -- queries --------------------------------------------------------------------------

    def covered(self, hi: int) -> bool:
        """Whether the index is ready and answers for every offset below ``hi`` (False if it cannot catch up)."""
        if not self.ready:
            return False
        try:
            return self.catch_up() >= hi
        except sqlite3.Error as exc:  # the index is optional: callers scan the log
            logger.warning("history index could not catch up, history scans the log: %s", exc)
            return False

    def select(self, lo: int, hi: int, where: str = "", args: tuple = (), *,
               indexed: bool = True) -> Iterator[IndexedEvent]:
        """The rows with offsets in [lo, hi) that pass ``where`` (SQL over the columns), in offset order.

        ``indexed``: ``where`` narrows the rows through an index (read it, not the whole range).
        """
        with self._lock:
            rows = self._db.execute(_ranged(f"SELECT {', '.join(_COLUMNS)} FROM events WHERE", where, indexed),
                                    (lo, hi, *args)).fetchall()
        return map(_indexed, rows)

    @property
    def first_offset(self) -> int:
        """The first offset the index holds a row for."""
        return self._start

    def acl_changes(self, lo: int, hi: int, where: str = "", args: tuple = ()) -> list[tuple]:
        """(created: 1, deleted: 0; ACL id; the binding's fields...) of the ACL events in [lo, hi) that pass
        ``where`` (SQL over the columns), in offset order.

        ``acls(rows)`` makes the rows' bindings (built only for the rows a caller keeps).
        """
        sql = ("SELECT type = 'AclCreated', substr(entity, 5), restype, name, pattern, principal, acl_host, op, perm "
               "FROM events WHERE +restype IS NOT NULL AND")
        with self._lock:
            return self._db.execute(_ranged(sql, where, indexed=True), (lo, hi, *args)).fetchall()

    def entity_changes(self, lo: int, hi: int) -> list[tuple[int, str, str, str]]:
        """(offset, event type, entity key, redacted payload as JSON) of the SCRAM and token events in [lo, hi)."""
        with self._lock:
            return self._db.execute(
                "SELECT offset, type, entity, payload FROM events WHERE offset >= ? AND offset < ? "
                "AND +restype IS NULL ORDER BY offset", (lo, hi)).fetchall()

    def last_changes(self, entities: Iterable[str], before: int,
                     event_types: Iterable[str]) -> dict[str, tuple[int, str, str]]:
        """Each SCRAM or token entity's last event before ``before`` of one of ``event_types``.

        entity key -> (offset, event type, redacted payload as JSON); one probe of
        ``by_entity`` per entity.  Entities without such an event are left out.
        """
        types = sorted(event_types)
        sql = ("SELECT k.value, e.offset, e.type, e.payload FROM json_each(?) AS k JOIN events AS e "
               "ON e.offset = (SELECT offset FROM events WHERE restype IS NULL AND entity = k.value "
               f"AND offset < ? AND type IN ({', '.join('?' * len(types))}) ORDER BY offset DESC LIMIT 1)")
        with self._lock:
            rows = self._db.execute(sql, (json.dumps(list(entities)), before, *types)).fetchall()
        return {entity: change for entity, *change in rows}


def _ranged(select: str, where: str, indexed: bool) -> str:
    """``select`` (ending in WHERE or AND) over offsets [?, ?) and ``where``, in offset order.

    An ``indexed`` filter is read through its index ('+offset' keeps SQLite off the
    offset range); any other reads the range from the table's own B-tree.
    """
    if where and indexed:
        return f"{select} +offset >= ? AND +offset < ? AND ({where}) ORDER BY offset"
    return f"{select} offset >= ? AND offset < ?{f' AND ({where})' if where else ''} ORDER BY offset"


def acls(rows: Iterable[tuple]) -> list[tuple[str, AclBinding]]:
    """(ACL id, binding) of rows ``HistoryIndex.acl_changes`` returns (one comprehension: diffs make 100k)."""
    rt, pt, ops, perms = _RESOURCE_TYPES, _PATTERN_TYPES, _OPERATIONS, _PERMISSIONS
    return [(r[1], AclBinding(ResourcePattern(rt[r[2]], r[3], pt[r[4]]),
                              AccessControlEntry(r[5], r[6], ops[r[7]], perms[r[8]]))) for r in rows]


def net_acls(rows: Iterable[tuple]) -> tuple[dict[str, tuple], dict[str, tuple]]:
    """(added, removed): rows ``HistoryIndex.acl_changes`` returns, in offset order, netted by ACL id.

    ACL ids are never reused (a fresh UUID per created ACL), so an ACL created among the
    rows and not deleted there was added, and one deleted there but not created there was
    removed (its delete row carries its binding).
    """
    added: dict[str, tuple] = {}
    removed: dict[str, tuple] = {}
    for row in rows:  # (created, ACL id, ...)
        if row[0]:
            added[row[1]] = row
        elif added.pop(row[1], None) is None:
            removed[row[1]] = row
    return added, removed


# by code: a dict lookup is several times cheaper than calling the enum
_RESOURCE_TYPES = {int(t): t for t in ResourceType}
_PATTERN_TYPES = {int(t): t for t in PatternType}
_OPERATIONS = {int(t): t for t in AclOperation}
_PERMISSIONS = {int(t): t for t in AclPermissionType}


def _party_rows(rows: Iterable[tuple]) -> Iterator[tuple[str, int]]:
    """The rows of the parties table that index ``rows`` of the events table: (party, offset)."""
    for row in rows:
        if row[_PARTIES] is not None:
            for party in set(json.loads(row[_PARTIES])):
                yield party, row[0]


def _chain(key: bytes, digest: bytes, block: list[tuple]) -> bytes:
    """The digest chained over one block of rows.

    Every value is an int, a str or None, so marshal's version 0 (no references, no
    interning marks) writes equal rows as equal bytes, at half the cost of repr.
    """
    return hashlib.blake2b(digest + marshal.dumps(block, 0), key=key, digest_size=32).digest()


def _digest(key: bytes, sealed: bytes, tail: list[tuple]) -> bytes:
    """The digest over every row: the full blocks' chain, then the rows after them."""
    return _chain(key, sealed, tail) if tail else sealed


def _meta_mac(key: bytes, meta: dict[str, str]) -> str:
    body = json.dumps({k: v for k, v in meta.items() if k != "mac"}, sort_keys=True).encode()
    return hmac.new(key, _MAC_LABEL + body, hashlib.sha256).hexdigest()


def index_problem(path: Path, log: Log, key_id: str | None = None, key: bytes | None = None, *,
                  against_log: bool = False, rows: bool = True) -> str | None:
    """Why the index file at ``path`` cannot be served for ``log`` (None: it can), checking every row.

    ``against_log`` (for ``log verify``) also compares every row with the event the log holds;
    ``rows=False`` checks the meta row only (for a file whose bytes are already authenticated).
    """
    key_id = key_id or log.keyring.newest_id
    if key is None:
        key = hashlib.blake2b(log.keyring.chain_key(key_id), digest_size=32, person=b"secmeta-hindex").digest()
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            meta = dict(db.execute("SELECT k, v FROM meta"))
            if not meta:
                return "it has no meta row (never completed)"
            if meta.get("key_id") != key_id or not hmac.compare_digest(meta.get("mac", ""), _meta_mac(key, meta)):
                return "its meta row fails its HMAC check: it was altered or written under another key"
            if meta["format"] != str(INDEX_FORMAT) or meta["store_id"] != log.store.store_id:
                return "it was written for another store or format"
            end = int(meta["end"])
            if against_log and end < log.start_offset:
                return None  # behind retention: nothing left to compare; the store rebuilds it when it opens
            link = log.link_at(end) if log.start_offset <= end <= log.end_offset else None
            if link is None or link.hex() != meta["link"]:
                return f"it ends at offset {end}, which does not fit the log's chain (stale or from another log)"
            if not rows:
                return None
            if frozenset(db.execute(_SCHEMA)) not in _EXPECTED_SCHEMAS:
                return "its schema is not the index's: a table, index or trigger was added, removed or altered"
            if (integrity := db.execute("PRAGMA integrity_check").fetchall()) != [("ok",)]:
                return f"it fails SQLite's integrity check (an index or page was altered): {integrity[0][0]}"
            digest, expected, party_rows = b"", int(meta["start"]), set()
            events, parties = (log.read(log.start_offset, end) if against_log else None), {}
            cursor = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM events ORDER BY offset")
            while block := cursor.fetchmany(_BLOCK):  # offsets ascend: the first and last tell a gap
                if block[0][0] != expected or block[-1][0] != expected + len(block) - 1:
                    return f"its rows skip offsets after offset {expected - 1}"
                if events is not None:
                    for row in block:
                        if row[0] >= log.start_offset:
                            logged = _row(next(events), parties)
                            if logged[:-2] != row[:-2] or logged[-1] != row[-1] or (
                                    log.start_offset == 0 and logged[-2] != row[-2]):
                                return f"its row at offset {row[0]} does not match the logged event"
                party_rows.update(_party_rows(block))
                digest, expected = _chain(key, digest, block), expected + len(block)
            if expected != end or digest.hex() != meta["digest"]:
                return "its rows do not match their authenticated digest: rows were altered, added or removed"
            if set(db.execute("SELECT party, offset FROM parties")) != party_rows:
                return "its parties table does not match its rows: rows were altered, added or removed"
        finally:
            db.close()
    except (sqlite3.Error, KeyError, ValueError) as exc:
        return f"it is not a readable index: {exc}"
    return None


def condemn(path: Path, problem: str) -> None:
    """Mark the index file at ``path`` as wrong (``log verify``): the next open rebuilds it, no close seals it."""
    Path(f"{path}{_CONDEMNED_SUFFIX}").write_text(problem)
    Path(f"{path}{_SEAL_SUFFIX}").unlink(missing_ok=True)


def token_parties(image) -> dict[str, tuple[str, ...]]:
    """Who each token in a SecurityImage involves: owner, requester, renewers."""
    return {info.token_id: (info.owner, info.requester, *info.renewers) for info in image.tokens}
