"""A derived, rebuildable index of the log for history and forensics: who, what resource, when.

    DIR/history/index.sqlite    events: one row per logged event (offset, time, actor,
                                type, entity; an ACL's seven fields, and its id and
                                binding as one text, or for any other kind the
                                principals it involves and its redacted payload);
                                parties: (party, offset) for every principal an event
                                of another kind involves, derived from the rows

It is one of the two ``HistoryBackend`` implementations (secmeta.core.forensics.backend),
answering as the log scan does, and the only place that holds SQL.  Which principals an
event involves comes from ``secmeta.events.entities`` (``Parties``): a kind added there
is indexed and found by ``history(principal=)`` without a change here.

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

import functools
import hashlib
import hmac
import json
import logging
import marshal
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from operator import itemgetter
from pathlib import Path

from secmeta.core.forensics.backend import (
    REOPENABLE,
    Change,
    Credential,
    Diff,
    HistoryEntry,
    HistoryQuery,
    ResourceMatch,
    TokenExpiryChange,
    attributes,
    entity_changes,
    token_parties,
)
from secmeta.core.forensics.index_seal import INDEX_DIR, INDEX_FILE, index_key, meta_mac
from secmeta.core.forensics.made_when_read import AclPair, MadeWhenRead
from secmeta.core.log import Log
from secmeta.core.log.evidence import refuse_evidence
from secmeta.events.entities import ACLS, CREDENTIALS, TOKENS, Parties, kind_of
from secmeta.events.records import (
    AclCreated,
    AclDeleted,
    Envelope,
    Operator,
    ScramCredentialDeleted,
)
from secmeta.events.redact import redacted
from secmeta.events.types import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramMechanism,
    from_output_name,
)
from secmeta.projections.gc_pause import FREEZE_AFTER, paused_gc
from secmeta.projections.tokens import TokenInfo

__all__ = ["HistoryIndex", "condemn", "index_problem", "token_parties"]

logger = logging.getLogger("secmeta.history_index")
INDEX_FORMAT = 11  # 5: every non-ACL kind's principals in parties (entities.Parties); 6: role (EntityKind.role);
# 7: a settings row involves the principals super.users names and those of the value it replaced
# 8: the operator column (whether the actor was asserted, the writing process)
# 9: payloads name a SCRAM mechanism as Kafka does (SCRAM-SHA-256: events.types.output_name, through events.redact)
# 10: the acl column (an ACL row's binding as one JSON text: a diff reads its range in one scan, one value a row)
# 11: the acl column begins with the ACL's id (a diff's range holds one value per ACL row, not two)
_CHUNK = 100_000  # rows per transaction
_BLOCK = 1024  # rows per link of the digest chain
_SEAL_SUFFIX = ".mac"  # beside the file: its keyed digest, written at a clean close
_CONDEMNED_SUFFIX = ".bad"  # beside the file: why log verify found it wrong (the next open rebuilds it)
_CACHE_KB = 65_536
_ACL_EVENTS = {"AclCreated": AclCreated, "AclDeleted": AclDeleted}
_COLUMNS = ("offset", "ts", "actor", "host", "request", "operator", "type", "entity", "principal", "restype", "pattern",
            "name", "acl_host", "op", "perm", "role", "acl", "parties", "payload")
_PARTIES = _COLUMNS.index("parties")
_TYPE, _ENTITY, _RESTYPE, _ROLE = (_COLUMNS.index(c) for c in ("type", "entity", "restype", "role"))
_ACL_COLUMNS = _COLUMNS[:_COLUMNS.index("role")]  # what a Change is made of
_compact_json = json.JSONEncoder(separators=(",", ":")).encode
# The tables; a fresh build fills them first and adds the secondary indexes once (sorting
# a million keys at the end is several times cheaper than keeping five B-trees up per row).
_TABLES = f"""
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events ({_COLUMNS[0]} INTEGER PRIMARY KEY, {", ".join(_COLUMNS[1:])});
CREATE TABLE IF NOT EXISTS parties (party TEXT NOT NULL, offset INTEGER NOT NULL, PRIMARY KEY (party, offset))
    WITHOUT ROWID;
"""
# by_principal and by_resource hold the ACL rows; by_entity the rows of every other kind (ask it with
# 'restype IS NULL'); the other kinds' principals are in the parties table.
_INDEXES = """
CREATE INDEX IF NOT EXISTS by_actor ON events(actor, offset);
CREATE INDEX IF NOT EXISTS by_principal ON events(principal, offset) WHERE principal IS NOT NULL;
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


def _row(envelope: Envelope, parties: Parties, opened: dict[str, tuple[str, ...]]) -> tuple:
    """The events row of ``envelope``; ``parties`` observes it, and ``opened`` keeps who each entity it
    opens involves (the index's meta row carries them on, for events after a reopen)."""
    event = envelope.event
    kind = type(event)
    entity = kind_of(event)
    if entity is ACLS:  # most rows: their payload is their columns
        p, e = event.binding.pattern, event.binding.entry
        return (envelope.offset, envelope.timestamp_ms, envelope.actor_principal, envelope.actor_host,
                envelope.request_id, _operator_column(envelope), kind.__name__, event.entity_key, e.principal,
                p.resource_type.value, p.pattern_type.value, p.name, e.host, e.operation.value,
                e.permission_type.value, ACLS.role(event), _acl_text(event.acl_id, p, e), None, None)
    involved = parties.of(event)  # before observing: the entity's previous opening event's parties count
    parties.observe(event)
    if entity.carries_parties and kind in entity.opens:
        opened[event.entity_key] = entity.principals(event)
    payload = _compact_json(redacted(envelope)["payload"])
    return (envelope.offset, envelope.timestamp_ms, envelope.actor_principal, envelope.actor_host,
            envelope.request_id, _operator_column(envelope), kind.__name__, event.entity_key,
            None, None, None, None, None, None, None,
            entity.role(event), None, json.dumps(involved) if involved else None, payload)


def _operator_column(envelope: Envelope) -> str:
    """The operator column: whether the actor was asserted and the writing process, as compact JSON."""
    return _operator_json(envelope.actor_asserted, envelope.operator_user, envelope.operator_host,
                          envelope.operator_pid, envelope.operator_program)


@functools.lru_cache(maxsize=256)  # a batch's events share their operator
def _operator_json(asserted: bool, user: str, host: str, pid: int, program: str) -> str:
    return _compact_json([asserted, user, host, pid, program])


@functools.lru_cache(maxsize=256)
def _operator_of(column: str) -> tuple[bool, Operator]:
    asserted, user, host, pid, program = json.loads(column)
    return asserted, Operator(user, host, pid, program)


def _entry(row: tuple, resource: ResourceMatch | None, was_open: bool = False) -> HistoryEntry | None:
    """The history entry of an events row (``was_open``: its entity was open before it), or None when
    ``resource`` is given and the row does not pass it."""
    (offset, ts, actor, host, request, operator, etype, entity, principal, restype, pattern, name, acl_host, op, perm,
     role, _, _, payload) = row
    asserted, process = _operator_of(operator)
    if restype is None:
        if resource is not None and not resource.matches(etype, None, entity):
            return None
        return HistoryEntry(offset, ts, actor, host, request, asserted, process, etype, entity, json.loads(payload),
                            kind_of(etype).action(role, was_open))
    binding = _binding(restype, name, pattern, principal, acl_host, op, perm)
    if resource is not None and not resource.matches(etype, binding, entity):
        return None
    envelope = Envelope(offset, ts, actor, host, request, _ACL_EVENTS[etype](entity.split(":", 1)[1], binding))
    return replace(HistoryEntry.of(envelope), actor_asserted=asserted, operator=process)


def _change(row: tuple) -> Change:
    (offset, ts, actor, host, request, operator, etype, entity, principal, restype, pattern, name, acl_host, op,
     perm) = row
    return Change(offset, ts, actor, host, request, *_operator_of(operator), etype, entity.split(":", 1)[1],
                  _binding(restype, name, pattern, principal, acl_host, op, perm))


def _binding(restype: int, name: str, pattern: int, principal: str, host: str, op: int, perm: int) -> AclBinding:
    return AclBinding(ResourcePattern(_RESOURCE_TYPES[restype], name, _PATTERN_TYPES[pattern]),
                      AccessControlEntry(principal, host, _OPERATIONS[op], _PERMISSIONS[perm]))


class HistoryIndex:
    """The index of one store's log; ``ready`` once built or checked, then kept up to the log's end."""

    def __init__(self, log: Log, parties_at_start=None, open_at=None):
        self.log = log
        self.path = Path(log.store.path) / INDEX_DIR / INDEX_FILE
        self._key_id = log.keyring.newest_id
        self._key = index_key(log.keyring, self._key_id)
        self._parties_at_start = parties_at_start  # () -> {entity key: parties} of tokens open at log.start_offset
        self._open_at = open_at  # n -> the keys of backend.REOPENABLE kinds open after the first n events
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._start = self._end = 0  # the index holds rows [start, end)
        self._sealed = b""  # the digest over the full blocks of rows
        self._tail: list[tuple] = []  # the rows after them (fewer than a block)
        self._opened: dict[str, tuple[str, ...]] = {}  # who each entity opened involves (entities.Parties)
        self._parties = Parties()
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
            problem, older = None, None
            if self._condemned_path.exists():
                problem = f"log verify found it wrong: {self._condemned_path.read_text(errors='replace')}"
            elif self.path.exists():
                # an index past the log's end is evidence of a cut: refused (never rebuilt) as the log's open does
                refuse_evidence(self.log.store, self.log.keyring, self.log.end_offset)
                older = self._older_key_id()
                if older is not None:
                    # written under a key the keyring still holds but no longer writes with (keys generate rotated
                    # it in): checked row by row under that key, then resealed under the newest
                    self._seal_path.unlink(missing_ok=True)
                    self.rows_checked = True
                    problem = index_problem(self.path, self.log, older, index_key(self.log.keyring, older))
                else:
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
                if older is not None:
                    self._reseal(older)
            self._catch_up()
            self._db.executescript(_INDEXES)  # after a fresh build's bulk load; present already otherwise
            self._ready.set()

    def _older_key_id(self) -> str | None:
        """The key id the file's meta row names when the keyring holds it and it is not the newest, else None."""
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                found = db.execute("SELECT v FROM meta WHERE k = 'key_id'").fetchone()
            finally:
                db.close()
        except sqlite3.Error:
            return None  # the check under the newest key says what is wrong with it
        key_id = found[0] if found else None
        return key_id if key_id != self._key_id and key_id in self.log.keyring else None

    def _reseal(self, older: str) -> None:
        """Chain the rows' digest and authenticate the meta row under the newest key (checked under ``older``)."""
        sealed, tail = b"", []
        for row in self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM events ORDER BY offset"):
            tail.append(row)
            if len(tail) == _BLOCK:
                sealed, tail = _chain(self._key, sealed, tail), []
        self._write(self._db, [], sealed, tail)
        logger.info("history index %s resealed under key %s (was %s)", self.path, self._key_id, older)

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
            self._opened = dict(self._parties_at_start()) if self.log.start_offset and self._parties_at_start \
                else {}
            self._parties = Parties(self._opened.items())
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
            self._opened = {k: tuple(v) for k, v in json.loads(meta["parties"]).items()}
            self._parties = Parties(self._opened.items())

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
            row = _row(envelope, self._parties, self._opened)
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
                "parties": json.dumps(self._opened, separators=(",", ":"), sort_keys=True),
                "key_id": self._key_id}
        meta["mac"] = meta_mac(self._key, meta)
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

    @property
    def first_offset(self) -> int:
        """The first offset the index holds a row for."""
        return self._start

    def entries(self, query: HistoryQuery) -> Iterator[HistoryEntry]:
        """history's entries: its filters asked of the columns (``resource`` also of the rows' bindings)."""
        where, args = [], []
        if query.start_ms is not None:
            where.append("ts >= ?")
            args.append(query.start_ms)
        if query.end_ms is not None:
            where.append("ts <= ?")
            args.append(query.end_ms)
        kind_only = False
        if query.event_types is not None:
            where.append(f"type IN ({_marks(query.event_types)})")
            args += sorted(query.event_types)
            kinds = {kind_of(t) for t in query.event_types}
            if len(kinds) == 1 and (kind := kinds.pop()) is not ACLS:  # one kind's rows: a range of by_entity
                where.append("restype IS NULL AND entity >= ? AND entity < ?")
                args += [f"{kind.name}:", f"{kind.name};"]
                kind_only = True
        if query.user is not None:  # a SCRAM credential's rows are those of its entity
            where.append("restype IS NULL AND entity IN (?, ?)")
            args += [ScramCredentialDeleted(query.user, m).entity_key
                     for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
        if query.principal is not None:  # backend.about_principal: the actor, an ACL's principal or 'User:*',
            # an ACL on the USER resource naming the principal, or a party to another kind's event
            on_user, on_user_args = _covering(ResourceType.USER, query.principal)
            where.append("offset IN (SELECT offset FROM events WHERE actor = ? UNION ALL SELECT offset FROM events "
                         "WHERE principal IN (?, ?) UNION ALL SELECT offset FROM parties WHERE party = ? "
                         f"UNION ALL SELECT offset FROM events WHERE {on_user})")
            args += [query.principal, query.principal, WILDCARD_PRINCIPAL, query.principal, *on_user_args]
        resource = query.resource
        if resource is not None:
            if resource.tokens:
                where.append(f"restype IS NOT NULL OR type IN ({_marks(TOKENS.event_names)})")
                args += TOKENS.event_names
            else:
                where.append("restype IS NOT NULL")
        sql = _ranged(f"SELECT {', '.join(_COLUMNS)} FROM events WHERE", " AND ".join(f"({w})" for w in where),
                      indexed=query.principal is not None or query.user is not None or kind_only)
        with self._lock:
            rows = self._db.execute(sql, (query.lo, query.hi, *args)).fetchall()
            opened = self._open_before(rows)
        for row in rows:
            if (entry := _entry(row, resource, row[0] in opened)) is not None:
                yield entry

    def _open_before(self, rows: list[tuple]) -> set[int]:
        """The offsets of the opening rows of ``backend.REOPENABLE`` kinds whose entity was open before them:
        its last row before says so (one probe of ``by_entity`` each), else the keys open at the index's start."""
        probe = ("SELECT role FROM events WHERE restype IS NULL AND entity = ? AND offset < ? "
                 "ORDER BY offset DESC LIMIT 1")
        opened, at_start = set(), None
        for row in rows:
            etype, entity, role = row[_TYPE], row[_ENTITY], row[_ROLE]
            if row[_RESTYPE] is not None or role != "open" or kind_of(etype) not in REOPENABLE:
                continue
            last = self._db.execute(probe, (entity, row[0])).fetchone()
            if last is None:
                if self._start == 0 or self._open_at is None:
                    continue
                if at_start is None:
                    at_start = self._open_at(self._start)
                was_open = entity in at_start
            else:
                was_open = last[0] != "close"
            if was_open:
                opened.add(row[0])
        return opened

    def acl_changes(self, lo: int, hi: int, resource_type: ResourceType, name: str) -> Iterator[Change]:
        where, args = _covering(resource_type, name)
        sql = _ranged(f"SELECT {', '.join(_ACL_COLUMNS)} FROM events WHERE", where, indexed=True)
        with self._lock:
            rows = self._db.execute(sql, (lo, hi, *args)).fetchall()
        return map(_change, rows)

    def acls_at(self, n: int, resource_type: ResourceType, name: str) -> list[tuple[str, AclBinding]]:
        """From the rows since offset 0 (``first_offset`` must be 0): only those on the patterns that apply to the
        resource are read; ACL ids are never reused, so those created and not deleted before ``n`` are in force."""
        self._require_from_zero(n)
        where, args = _covering(resource_type, name)
        sql = _ranged(f"SELECT {_CREATED}, acl FROM events WHERE +restype IS NOT NULL AND", where, indexed=True)
        with self._lock:
            rows = self._db.execute(sql, (0, n, *args)).fetchall()
        alive, _ = _net_acls(dict(_acl_pairs([text for created, text in rows if created])),
                             dict(_acl_pairs([text for created, text in rows if not created])))
        return _acls(sorted(alive.items()))

    def diff(self, a: int, b: int) -> Diff:
        """The diff from one scan of the rows in [a, b) and one probe per touched credential or token
        (``first_offset`` 0).

        ACLs are netted by id.  A credential's state at a point is its last event before it;
        two upsert events never carry the same sealed secret (a fresh salt and nonce per seal),
        so one upserted in [a, b) differs.  ACLs, credentials and tokens are netted from their
        rows' event types; the values listed are made from the rows' texts when first read.
        """
        self._require_from_zero(a)
        with paused_gc() as paused:  # tens of thousands of rows and bindings, no cycles among them
            created, deleted, token_rows, scram_rows, rows = self._scanned(a, b)
            added, removed = _net_acls(created, deleted)
            # a large answer is frozen: the collector's first pass after the pause would rescan every row
            paused.freeze = len(added) + len(removed) + len(token_rows) + len(scram_rows) >= FREEZE_AFTER
            others: dict[str, list[tuple[str, str, str]]] = {}  # the other kinds' rows, by entity
            for _, event_type, entity, role, payload in rows:
                others.setdefault(entity, []).append((event_type, role, payload))
            upserted, deleted = self._credential_changes(a, scram_rows)
            issued, renewed, expired, gone = self._token_changes(a, token_rows)
            before = self._states_at(others, a)
            after = {entity: _folded(before.get(entity), rows) for entity, rows in others.items()}
            return Diff(a, b, _diff_acls(added), _diff_acls(removed), upserted, deleted, issued, renewed, expired,
                        gone, entity_changes(before, {e: s for e, s in after.items() if s is not None}, others))

    def _require_from_zero(self, a: int) -> None:
        if self._start != 0 or a < self.log.start_offset:
            raise ValueError(f"the history index starts at offset {self._start}: it holds no state before it")

    def _scanned(self, lo: int, hi: int) -> tuple[dict[str, str], dict[str, str], list[list], list[list], list[list]]:
        """The rows in [lo, hi) from one scan (``_RANGE``): the created and the deleted ACLs, ACL id -> binding
        text; the token rows and the credential rows as [offset, event type, entity key, redacted payload
        as JSON], and the other kinds' rows as [offset, event type, entity key, role, payload], each in offset
        order (a payload is parsed by its user only if needed: reading a field in SQLite costs as much as
        json.loads).

        SQLite hands a row to Python for about what four of its values cost to aggregate, so
        the range comes back as seven values: each ACL's id and text come back as they are stored
        (one joined string for each of the two kinds of ACL rows), its text parsed when its
        binding is first read (``_acls``)."""
        with self._lock:
            n_created, created, n_deleted, deleted, tokens, scram, others = self._db.execute(_RANGE, (lo, hi)).fetchone()
        # the order an aggregate sees its rows is SQLite's: offset order (sorting them again is linear), not promised
        token_rows, scram_rows, rows = sorted(json.loads(tokens)), sorted(json.loads(scram)), sorted(json.loads(others))
        return (dict(_joined_pairs(n_created, created)), dict(_joined_pairs(n_deleted, deleted)), token_rows,
                scram_rows, rows)

    def _states_at(self, entities: Iterable[str], n: int) -> dict[str, dict]:
        """The attributes of each non-ACL entity open after the first ``n`` events: its rows before ``n`` from
        its last opening or closing one, folded (one probe of ``by_entity`` per entity)."""
        sql = ("SELECT e.entity, e.type, e.role, e.payload FROM json_each(?) AS k JOIN events AS e "
               "ON e.restype IS NULL AND e.entity = k.value AND e.offset < ? AND e.offset >= (SELECT offset "
               "FROM events WHERE restype IS NULL AND entity = k.value AND offset < ? AND role != 'update' "
               "ORDER BY offset DESC LIMIT 1) ORDER BY e.offset")
        with self._lock:
            rows = self._db.execute(sql, (json.dumps(list(entities)), n, n)).fetchall()
        by_entity: dict[str, list[tuple[str, str, str]]] = {}
        for entity, *row in rows:
            by_entity.setdefault(entity, []).append(row)
        states = {entity: _folded(None, rows) for entity, rows in by_entity.items()}
        return {entity: state for entity, state in states.items() if state is not None}

    def _last_changes(self, entities: Iterable[str], before: int,
                      event_types: Iterable[str]) -> dict[str, tuple[int, str, str]]:
        """Each non-ACL entity's last event before ``before`` of one of ``event_types``.

        entity key -> (offset, event type, redacted payload as JSON); one probe of
        ``by_entity`` per entity.  Entities without such an event are left out.
        """
        types = sorted(event_types)
        sql = ("SELECT k.value, e.offset, e.type, e.payload FROM json_each(?) AS k JOIN events AS e "
               "ON e.offset = (SELECT offset FROM events WHERE restype IS NULL AND entity = k.value "
               f"AND offset < ? AND type IN ({_marks(types)}) ORDER BY offset DESC LIMIT 1)")
        with self._lock:
            rows = self._db.execute(sql, (json.dumps(list(entities)), before, *types)).fetchall()
        return {entity: change for entity, *change in rows}

    def _credential_changes(self, a: int, rows: list[list]) -> tuple[MadeWhenRead[Credential],
                                                                      MadeWhenRead[Credential]]:
        """(upserted, deleted) credentials, given the credential rows in [a, b) in offset order ([offset, event type,
        entity key, redacted payload as JSON]): a credential whose last row there upserts it was upserted; one whose
        last row deletes it was deleted if its last row before a upserted it (one probe each).  Their payloads are
        parsed when first read."""
        last = {entity: (event_type, payload) for _, event_type, entity, payload in rows}  # the last row wins
        upserted = [(entity, payload) for entity, (event_type, payload) in last.items() if event_type == _UPSERTED]
        before = self._last_changes([e for e, (t, _) in last.items() if t != _UPSERTED], a, _SCRAM_EVENTS)
        deleted = [(entity, payload) for entity, (_, event_type, payload) in before.items() if event_type == _UPSERTED]
        return MadeWhenRead(upserted, _credentials, _credential_order), MadeWhenRead(deleted, _credentials,
                                                                                     _credential_order)

    def _tokens_at(self, n: int, entities: Iterable[str]) -> dict[str, _TokenState]:
        """The tokens among ``entities`` alive after the first ``n`` events: entity key -> (its issue's redacted
        payload as JSON, the payload of the last row that moved its expiry, None if none did), in one query: a
        token's last row before ``n`` says whether it was alive (not a removal) and its expiry (an issue, renewal
        and expiry each set it); its first row, its issue (ids are never reused), gives the rest.  Both are found
        in ``by_entity`` alone."""
        sql = ("SELECT k.value, o.type, o.payload, l.type, l.payload FROM json_each(?) AS k "
               "JOIN events AS l ON l.offset = (SELECT offset FROM events WHERE restype IS NULL AND "
               "entity = k.value AND offset < ? ORDER BY offset DESC LIMIT 1) "
               "JOIN events AS o ON o.offset = (SELECT offset FROM events WHERE restype IS NULL AND "
               "entity = k.value ORDER BY offset LIMIT 1)")
        with self._lock:
            rows = self._db.execute(sql, (json.dumps(list(entities)), n)).fetchall()
        alive = {}
        for entity, first_type, issue, last_type, last in rows:
            if last_type == _REMOVED:
                continue
            if first_type != _ISSUED:
                raise ValueError("the history index holds a token whose first row does not issue it")
            alive[entity] = (issue, None if last_type == _ISSUED else last)
        return alive

    def _token_changes(self, a: int, rows: list[list]) -> tuple[MadeWhenRead[TokenInfo], MadeWhenRead[TokenExpiryChange],
                                                                 MadeWhenRead[TokenExpiryChange], MadeWhenRead[TokenInfo]]:
        """(issued, renewed, expired, removed) tokens, given the token rows in [a, b) in offset order ([offset, event
        type, entity key, redacted payload as JSON]).

        Token ids are never reused (a fresh UUID per token): one whose first event in [a, b)
        issues it did not exist at a; the others' state at a is looked up.  The tokens are
        netted from the rows' event types alone: a token issued and removed in between is
        never made; the payloads of those listed are parsed when first read, all at once.
        """
        first = {entity: event_type for _, event_type, entity, _ in reversed(rows)}  # the first row wins
        at_start = self._tokens_at(a, [e for e, t in first.items() if t != _ISSUED])
        now: dict[str, _TokenState | None] = dict(at_start)  # None once removed
        renewed: dict[str, list] = {}  # token id -> [token state before, payload of the last row, its offset]
        expired: dict[str, list] = {}
        for offset, event_type, entity, payload in rows:
            if event_type == _ISSUED:
                now[entity] = (payload, None)
            elif event_type == _REMOVED:
                now[entity] = None
            elif (state := now.get(entity)) is not None:  # renewed or expired
                target = renewed if event_type == _RENEWED else expired
                entry = target.get(token_id := entity[_TOKEN_ID:])
                if entry is None:
                    target[token_id] = [state, payload, offset]
                else:
                    entry[1], entry[2] = payload, offset
                now[entity] = (state[0], payload)
        issued, gone = [], []
        for entity in first:
            old, new = at_start.get(entity), now.get(entity)
            if old is None and new is not None:
                issued.append((entity, new))
            elif old is not None and new is None:
                gone.append((entity, old))
        # by entity key ('token:<id>') or by token id: in token id order
        return (MadeWhenRead(issued, _tokens, _FIRST), MadeWhenRead(list(renewed.items()), _expiry_changes, _FIRST),
                MadeWhenRead(list(expired.items()), _expiry_changes, _FIRST), MadeWhenRead(gone, _tokens, _FIRST))


_SCRAM_EVENTS = CREDENTIALS.event_names
_ISSUED, _REMOVED = TOKENS.open_names[0], TOKENS.close_names[0]
_RENEWED = TOKENS.update_names[0]
_UPSERTED = CREDENTIALS.open_names[0]
_EXPIRY = "expiry_timestamp_ms"  # of a token's issue, renewal and expiry payloads
_TOKEN_ID = len(TOKENS.name) + 1  # a token's entity key is 'token:<id>'
_SCRAM_USER = len(CREDENTIALS.name) + 1  # a credential's entity key is 'scram:<user>:<mechanism>'
_FIRST, _TEXT = itemgetter(0), itemgetter(1)
# a token's state at a point: its issue's redacted payload (JSON) and the payload of the last row that moved its
# expiry (a renewal or an expiry), None if none did
_TokenState = tuple[str, str | None]

def _folded(state: dict | None, rows: Iterable[tuple[str, str, str]]) -> dict | None:
    """An entity's attributes after its rows (event type, role, payload), from ``state`` (None: absent): an
    opening row sets them, an update changes those it carries (EntityKind.updated), a closing row ends it."""
    for event_type, role, payload in rows:
        if role == "close":
            state = None
        else:
            carried = attributes(kind_of(event_type), json.loads(payload))
            state = carried if role == "open" else None if state is None else {**state, **carried}
    return state


def _parsed(payloads: list[str]) -> list:
    """Redacted payloads (JSON texts) parsed in one call: the decoder's cost per call is most of a small one's."""
    return json.loads(f"[{','.join(payloads)}]")


def _credentials(rows: Sequence[tuple[str, str]]) -> list[Credential]:
    """The credentials of (entity key, upsert event's redacted payload as JSON) rows."""
    return [(p["user"], _mechanism(p["mechanism"]), p["iterations"]) for p in _parsed([p for _, p in rows])]


def _credential_order(row: tuple[str, str]) -> tuple[str, ScramMechanism]:
    """(user, mechanism) of a credential's (entity key 'scram:<user>:<mechanism>', payload) row."""
    user, _, mechanism = row[0][_SCRAM_USER:].rpartition(":")
    return user, _mechanism(mechanism)


@functools.cache
def _mechanism(name: str) -> ScramMechanism:
    return from_output_name(ScramMechanism, name)


def _expiries(states: Iterable[_TokenState]) -> tuple[list[dict], list[int]]:
    """The parsed issues of tokens' states and each one's expiry there (the last row that moved it, else the
    issue's), their payloads parsed in one call."""
    states = list(states)
    moved = [last for _, last in states if last is not None]
    parsed = _parsed([*(issue for issue, _ in states), *moved])
    issues, moves = parsed[:len(states)], iter(parsed[len(states):])
    return issues, [issue[_EXPIRY] if last is None else next(moves)[_EXPIRY]
                    for issue, (_, last) in zip(issues, states)]


def _tokens(rows: Sequence[tuple[str, _TokenState]]) -> list[TokenInfo]:
    """The tokens of (entity key, token state) rows, each with its expiry in that state."""
    issues, expiries = _expiries(state for _, state in rows)
    for issue, expiry in zip(issues, expiries):
        issue[_EXPIRY] = expiry
    return [TokenInfo.of(issue) for issue in issues]


def _expiry_changes(rows: Sequence[tuple[str, list]]) -> list[TokenExpiryChange]:
    """The expiry changes of (token id, [token state before, payload of the last row, its offset]) rows."""
    issues, before = _expiries(state for _, (state, _, _) in rows)
    after = _parsed([last for _, (_, last, _) in rows])
    return [TokenExpiryChange(token_id, issue["owner"], expiry, moved[_EXPIRY], offset)
            for (token_id, (_, _, offset)), issue, expiry, moved in zip(rows, issues, before, after)]


def _marks(values) -> str:
    return ", ".join("?" * len(values))


def _covering(rt: ResourceType, name: str) -> tuple[str, tuple]:
    """The filter (SQL, arguments) of the ACL rows whose pattern applies to the resource (acl_match.covers):
    the literal name, the literal '*' and every prefix of the name, prefixed."""
    prefixes = [name[:i] for i in range(1, len(name) + 1)]
    marks = _marks(prefixes)
    where = (f"restype = ? AND name IN (?, {marks}) AND "
             f"(pattern = ? AND name IN (?, ?) OR pattern = ? AND name IN ({marks}))")
    return where, (int(rt), WILDCARD, *prefixes, int(PatternType.LITERAL), name, WILDCARD, int(PatternType.PREFIXED),
                   *prefixes)


def _ranged(select: str, where: str, indexed: bool) -> str:
    """``select`` (ending in WHERE or AND) over offsets [?, ?) and ``where``, in offset order.

    An ``indexed`` filter is read through its index ('+offset' keeps SQLite off the
    offset range); any other reads the range from the table's own B-tree.
    """
    if where and indexed:
        return f"{select} +offset >= ? AND +offset < ? AND ({where}) ORDER BY offset"
    return f"{select} offset >= ? AND offset < ?{f' AND ({where})' if where else ''} ORDER BY offset"


_CREATED = "type = 'AclCreated'"
_TOKEN_TYPES, _SCRAM_TYPES = (", ".join(f"'{name}'" for name in kind.event_names) for kind in (TOKENS, CREDENTIALS))
# after an ACL's id in its acl text, and between a range's acl texts: JSON writes no control character raw, so
# none is inside a binding's text, and an id holding one is found out by the count of the parts (``_joined_pairs``)
_SEPARATOR = "\x1f"
_JOINED = f"group_concat(acl, char({ord(_SEPARATOR)}))"
# A diff's range in one scan (the events table's own B-tree, in offset order): the count of the created ACL rows and
# their acl texts joined by _SEPARATOR, the same of the deleted ones; the token rows, the credential rows and the
# other rows, each kind as a JSON array.
_RANGE = (f"SELECT count(*) FILTER (WHERE {_CREATED}), {_JOINED} FILTER (WHERE {_CREATED}), "
          f"count(*) FILTER (WHERE type = 'AclDeleted'), {_JOINED} FILTER (WHERE type = 'AclDeleted'), "
          "json_group_array(json_array(offset, type, entity, payload)) FILTER (WHERE restype IS NULL AND "
          f"type IN ({_TOKEN_TYPES})), "
          "json_group_array(json_array(offset, type, entity, payload)) FILTER (WHERE restype IS NULL AND "
          f"type IN ({_SCRAM_TYPES})), "
          "json_group_array(json_array(offset, type, entity, role, payload)) FILTER (WHERE restype IS NULL AND "
          f"type NOT IN ({_TOKEN_TYPES}, {_SCRAM_TYPES})) "
          "FROM events WHERE offset >= ? AND offset < ?")


def _acl_text(acl_id: str, pattern: ResourcePattern, entry: AccessControlEntry) -> str:
    """An ACL row's acl column: its id, _SEPARATOR, then its binding as compact JSON, [pattern codes, name, entry
    codes, principal, host] (the pattern codes hold the resource type (< 256) and the pattern type above it, the
    entry codes the operation (< 32) and the permission above it); ``_acls`` reads it back."""
    return acl_id + _SEPARATOR + _compact_json([int(pattern.resource_type) | int(pattern.pattern_type) << 8,
                                                pattern.name, int(entry.operation) | int(entry.permission_type) << 5,
                                                entry.principal, entry.host])


def _joined_pairs(count: int, joined: str | None) -> zip:
    """The (ACL id, binding text) pairs of ``count`` acl texts joined by _SEPARATOR."""
    parts = joined.split(_SEPARATOR) if joined is not None else []
    if len(parts) != 2 * count:  # an id holding the separator (the rows are authenticated: never written so)
        raise ValueError(f"the history index holds {count} ACL rows but {len(parts)} parts of their texts")
    each = iter(parts)
    return zip(each, each)  # (id, text), (id, text), ...


def _acl_pairs(texts: list[str]) -> zip:
    """The (ACL id, binding text) pairs of acl texts."""
    return _joined_pairs(len(texts), _SEPARATOR.join(texts) if texts else None)


def _diff_acls(netted: dict[str, str]) -> MadeWhenRead[AclPair]:
    """A diff's ACLs: its netted (ACL id, binding text) pairs, put in id order and their bindings made when first
    read (``_made_acls``)."""
    return MadeWhenRead(netted.items(), _made_acls, _FIRST)


def _made_acls(rows: Sequence[tuple[str, str]]) -> list[tuple[str, AclBinding]]:
    """``_acls`` of many rows at once, the collector paused and the bindings frozen (they live with the diff)."""
    with paused_gc(freeze=len(rows) >= FREEZE_AFTER):
        return _acls(rows)


def _acls(rows: Sequence[tuple[str, str]]) -> list[tuple[str, AclBinding]]:
    """(ACL id, binding) of (ACL id, binding text) pairs, their texts parsed as one JSON array.  Diffs make
    100k: the patterns and entries they share are made once each (they are immutable values)."""
    rt, pt, ops, perms = _RESOURCE_TYPES, _PATTERN_TYPES, _OPERATIONS, _PERMISSIONS
    patterns: dict[tuple, ResourcePattern] = {}
    entries: dict[tuple, AccessControlEntry] = {}
    out = []
    fields = json.loads(f"[{','.join(map(_TEXT, rows))}]")
    for (acl_id, _), (pattern_codes, name, entry_codes, principal, host) in zip(rows, fields):
        pattern = patterns.get(key := (pattern_codes, name))
        if pattern is None:
            pattern = patterns[key] = ResourcePattern(rt[pattern_codes & 0xff], name, pt[pattern_codes >> 8])
        entry = entries.get(key := (entry_codes, principal, host))
        if entry is None:
            entry = entries[key] = AccessControlEntry(principal, host, ops[entry_codes & 0x1f], perms[entry_codes >> 5])
        out.append((acl_id, AclBinding(pattern, entry)))
    return out


def _net_acls(created: dict[str, str], deleted: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(added, removed), ACL id -> binding text: the ACLs ``created`` and ``deleted`` in a range, netted by id
    (both are consumed).

    ACL ids are never reused (a fresh UUID per created ACL): an ACL is created at most once
    and deleted at most once, after; so one created in the range and not deleted there was
    added, and one deleted there but not created there was removed (its delete row carries
    its binding).  Order plays no part: the ids in both are found in one C-level set
    operation, and only they are visited.
    """
    for acl_id in created.keys() & deleted.keys():
        del created[acl_id], deleted[acl_id]
    return created, deleted


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


def index_problem(path: Path, log: Log, key_id: str | None = None, key: bytes | None = None, *,
                  against_log: bool = False, rows: bool = True) -> str | None:
    """Why the index file at ``path`` cannot be served for ``log`` (None: it can), checking every row.

    ``against_log`` (for ``log verify``) also compares every row with the event the log holds;
    ``rows=False`` checks the meta row only (for a file whose bytes are already authenticated).
    Without ``key_id`` it is checked under the key its meta row names if the keyring holds that key.
    """
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            meta = dict(db.execute("SELECT k, v FROM meta"))
            if not meta:
                return "it has no meta row (never completed)"
            if key_id is None:  # the key it names, when the keyring holds it (an older one after a rotation)
                key_id = meta.get("key_id") if meta.get("key_id") in log.keyring else log.keyring.newest_id
            if key is None:
                key = index_key(log.keyring, key_id)
            if meta.get("key_id") != key_id or not hmac.compare_digest(meta.get("mac", ""), meta_mac(key, meta)):
                return "its meta row fails its HMAC check: it was altered or written under another key"
            if meta["store_id"] != log.store.store_id:
                return "it was written for another store"
            if meta["format"] != str(INDEX_FORMAT):  # an older one is rebuilt, as any index that cannot be served
                return f"it is in format {meta['format']}, and this version reads format {INDEX_FORMAT} only"
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
            events, parties, opened = (log.read(log.start_offset, end) if against_log else None), Parties(), {}
            cursor = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM events ORDER BY offset")
            while block := cursor.fetchmany(_BLOCK):  # offsets ascend: the first and last tell a gap
                if block[0][0] != expected or block[-1][0] != expected + len(block) - 1:
                    return f"its rows skip offsets after offset {expected - 1}"
                if events is not None:
                    for row in block:
                        if row[0] >= log.start_offset:
                            logged = _row(next(events), parties, opened)
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

