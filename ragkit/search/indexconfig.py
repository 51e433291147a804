"""Which engine serves a database: chosen at ingest (`--index` or RAG_INDEX) and stored in
DB/.ragkit/index.json, so every later command uses it. Credentials never go there: they come from the
environment. The file also holds the database's id, which a cluster's pages index records as its owner, so that
two databases never share (and delete each other's pages from) one index, and the folder the id was given in, so
that a copy (`cp -r`: the same id, the original still there) is told from a database that moved.

    parse_index(spec) -> IndexConfig        # "embedded" | "opensearch+http://HOST:9200[/PREFIX]"
    plan_index(db, spec) -> IndexConfig     # what `spec` names for db (with db's id); nothing stored
    store_index(db, cfg);  configure_index(db, spec) -> IndexConfig (plan, then store)
    index_config(db) -> IndexConfig;  database_id(db) -> str;  redact(value) -> str (for messages)
    check_not_a_copy(db)                    # before writing to a cluster: a `cp -r` copy is refused
    renew_id(db) -> IndexConfig             # a new id (and a new prefix on its cluster); nothing stored
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import unicodedata
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from ragkit.core.errors import UsageError
from ragkit.core.paths import atomic_write_text, file_lock

CONFIG_FILE = "index.json"  # under DB/.ragkit/
LOCK_FILE = "index.lock"  # under DB/.ragkit/: one writer of index.json at a time
SCHEMES = ("opensearch+http", "opensearch+https")
# Index names are <prefix>-pages, <prefix>-documents, <prefix>-sessions: OpenSearch allows 255 bytes; ragkit keeps
# them short enough to read in a listing.
PREFIX_MAX = 61
_PREFIX = re.compile(r"[a-z0-9][a-z0-9_\-]*")
USAGE = "use `embedded` or opensearch+http://HOST:9200[/PREFIX]"


@dataclass(frozen=True)
class IndexConfig:
    backend: str = "embedded"  # "embedded" | "opensearch"
    url: str = ""  # http(s)://host:port of the cluster (never credentials: those come from the environment)
    prefix: str = ""  # index names: <prefix>-pages, <prefix>-documents, <prefix>-sessions
    # the database's id (random, made once): a cluster's pages index records the one that owns it. Kept when the
    # database moves to another engine; "" when unknown (an earlier ragkit's database, or a bare parse_index)
    database_id: str = ""
    # the database's absolute folder when its id was given (or last seen, after a move): opened elsewhere while that
    # folder still holds the same id, it is a copy (check_not_a_copy). Not part of what names the engine.
    root: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        return "embedded" if self.backend == "embedded" else f"opensearch {self.url}/{self.prefix}"

    def same_index(self, other: IndexConfig) -> bool:
        """Whether both name the same index (the database's id aside)."""
        return (self.backend, self.url, self.prefix) == (other.backend, other.url, other.prefix)


def redact(value: str) -> str:
    """`value` fit for a message: whatever comes before its last '@' (after '//' when there is one) is hidden, so a
    password typed into an address never shows, however malformed the rest is."""
    if "@" not in value:
        return value
    head, _, tail = value.rpartition("@")
    start = head.find("//")
    return (head[: start + 2] if start >= 0 else "") + "***@" + tail


def _slug(name: str) -> str:
    s = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-")[:40] or "db"


def _bad_index(why: str, spec: str | None = None) -> UsageError:
    """An index spec's error: `index='…': why` to a Python caller (ingest_into's and sync_index's `index`, as
    RAG_INDEX), `--index '…': why` from `rag` (errors.RagError)."""
    label, flag = ("index", "--index") if spec is None else (f"index={redact(spec)!r}", f"--index {redact(spec)!r}")
    return UsageError(f"{label}: {why}", flags={f"{label}:": f"{flag}:"})


def _split(spec: str) -> tuple[str, str, str]:
    """(scheme, host[:port], what follows the host) of an opensearch+http(s) spec; the scheme lowercased."""
    scheme, sep, rest = spec.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        raise _bad_index(USAGE, spec)
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    return scheme, rest[:cut], rest[cut:]


def parse_index(spec: str, db: Path | None = None) -> IndexConfig:
    """`embedded`, or `opensearch+http://HOST:PORT[/PREFIX]` (https too; scheme and host in any case). Without a
    prefix, one is made from the database's folder name and a random part, so two databases never share an index
    by accident."""
    spec = (spec or "").strip()
    if spec.lower() in ("", "embedded"):
        return IndexConfig()
    scheme, netloc, tail = _split(spec)
    if "@" in spec.partition("://")[2]:
        raise _bad_index("put credentials in RAG_OPENSEARCH_USER / RAG_OPENSEARCH_PASSWORD or RAG_OPENSEARCH_API_KEY, "
                         "never in the address (it is stored in the database)")
    parts = urlsplit(f"{scheme.split('+', 1)[1]}://{netloc}")
    if not parts.hostname:
        raise _bad_index("no host", spec)
    try:
        port = parts.port
    except ValueError:
        raise _bad_index("the port is not a number", spec) from None
    # everything after the host is the prefix: a '?' or '#' in it is refused, not read as a URL's query or fragment
    prefix = tail.strip("/")
    if len(prefix) > PREFIX_MAX:
        raise _bad_index(f"the prefix is {len(prefix)} characters long; at most {PREFIX_MAX} "
                         "(index names are PREFIX-pages, PREFIX-documents, PREFIX-sessions)")
    if prefix and not _PREFIX.fullmatch(prefix):
        raise _bad_index(f"the prefix {prefix!r} must be lowercase letters, digits, '-' or '_' "
                         "(starting with a letter or digit)")
    if not prefix:
        prefix = f"ragkit-{_slug(db.resolve().name if db else 'db')}-{secrets.token_hex(3)}"
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    url = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
    return IndexConfig(backend="opensearch", url=url, prefix=prefix)


def _config_path(db: Path) -> Path:
    return Path(db) / ".ragkit" / CONFIG_FILE


def index_config(db: Path) -> IndexConfig:
    """The engine this database was given at ingest (embedded when none was), and its id."""
    path = _config_path(db)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return IndexConfig()
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: unreadable index configuration ({e}); fix it or delete it for the "
                         "embedded engine") from None
    if not isinstance(data, dict) or data.get("backend") not in ("embedded", "opensearch"):
        raise UsageError(f"{path}: unknown index backend {redact(repr(data))}")
    if "@" in str(data.get("url") or ""):  # written by hand: the client would send (and its errors show) them
        raise UsageError(f"{path}: the cluster address holds credentials; put them in RAG_OPENSEARCH_USER / "
                         "RAG_OPENSEARCH_PASSWORD or RAG_OPENSEARCH_API_KEY")
    return IndexConfig(**{k: str(data.get(k) or "") for k in ("backend", "url", "prefix", "database_id", "root")})


@contextlib.contextmanager
def _locked(db: Path) -> Iterator[None]:
    """index.json's writers one at a time (POSIX; no-op elsewhere): two processes giving an earlier ragkit's
    database an id at once must agree on one."""
    with file_lock(Path(db) / ".ragkit" / LOCK_FILE):
        yield


def _write(db: Path, cfg: IndexConfig) -> None:
    atomic_write_text(_config_path(db), json.dumps(asdict(cfg), indent=2) + "\n")


def database_id(db: Path) -> str:
    """This database's id, made and stored (keeping its engine) the first time one is needed. A database not made
    yet gets a new id, stored with its first engine (store_index). "" when the folder cannot be written: such a
    database owns no index."""
    cfg = index_config(db)
    if cfg.database_id:
        return cfg.database_id
    if not Path(db).is_dir():
        return secrets.token_hex(8)
    try:
        with _locked(db):
            cfg = index_config(db)  # another process may have just given it one
            if not cfg.database_id:
                cfg = replace(cfg, database_id=secrets.token_hex(8), root=_here(db))
                _write(db, cfg)
    except OSError:
        return ""
    return cfg.database_id


def plan_index(db: Path, spec: str) -> IndexConfig:
    """The engine `spec` names for `db`, with the database's id (keeping the prefix when the same cluster is named
    again without one). Nothing about the engine is stored: store_index does, once the cluster has answered."""
    new = parse_index(spec, db)
    old = index_config(db)
    if new.backend == "opensearch" and old.backend == "opensearch" and old.url == new.url \
            and not _split(spec.strip())[2].strip("/"):
        new = old  # the same cluster again, no prefix given: the same index
    return replace(new, database_id=old.database_id or database_id(db))


def store_index(db: Path, cfg: IndexConfig) -> None:
    """Make `cfg` the engine of `db` (written only when it differs from the stored one). The recorded folder stays
    as stored (check_not_a_copy updates it after a move), this folder for a database that had none; a new id
    (renew_id) brings its own."""
    with _locked(db):
        old = index_config(db)
        if cfg != old:
            keep = old.root if cfg.database_id == old.database_id else ""
            _write(db, replace(cfg, root=keep or cfg.root or _here(db)))


def configure_index(db: Path, spec: str) -> IndexConfig:
    """Store the engine `spec` names for `db` at once (plan_index, then store_index). Returns the configuration
    now in force."""
    cfg = plan_index(db, spec)
    store_index(db, cfg)
    return cfg


def index_spec_from_env() -> str | None:
    return os.environ.get("RAG_INDEX") or None


def _here(db: Path) -> str:
    return str(Path(db).resolve())


def copy_of(db: Path, cfg: IndexConfig | None = None) -> str | None:
    """The folder `db` looks copied from: the one its configuration recorded with its id, when that is another
    folder that still exists and holds the same id. None for the original, a moved database (the recorded folder
    is gone, or holds another id now) and a database that recorded no folder (made by an earlier ragkit)."""
    cfg = cfg or index_config(db)
    here = _here(db)
    if not cfg.database_id or not cfg.root or cfg.root == here:
        return None
    other = Path(cfg.root)
    try:
        if not other.is_dir() or os.path.samefile(other, here):  # gone (moved), or this folder by another path
            return None
        return cfg.root if index_config(other).database_id == cfg.database_id else None
    except (OSError, UsageError):  # unreadable: nothing says it is the same database
        return None


def check_not_a_copy(db: Path) -> None:
    """Before writing to a cluster: refuse a copy of another database (it would share that one's index, and each
    sync would delete the other's pages), in one line saying how to give it its own; for a database that moved (or
    recorded no folder yet) record where it is now."""
    cfg = index_config(db)
    if not cfg.database_id:
        return
    original = copy_of(db, cfg)
    if original:
        fix = f"`rag index sync --db {db} --new-id`" + ("" if cfg.backend == "opensearch" else ", then run this again")
        where = f"the OpenSearch index {cfg.url}/{cfg.prefix}" if cfg.backend == "opensearch" else "a cluster index"
        raise UsageError(f"{db} looks like a copy of {original} (both have database id {cfg.database_id}): "
                         f"{where} would take them for one database and each sync would delete the other's pages, "
                         f"so nothing was written; give this one its own id and index with {fix}")
    here = _here(db)
    if cfg.root != here:
        try:
            with _locked(db):
                cfg = index_config(db)
                if cfg.root != here:
                    _write(db, replace(cfg, root=here))
        except OSError:  # a read-only database: it is not written to either
            pass


def renew_id(db: Path) -> IndexConfig:
    """`rag index sync --new-id`: this database with a new id recorded here, and, when a cluster indexes it, a new
    prefix on that cluster (so that a copy stops sharing its original's index). Nothing is stored: the caller
    stores it once the cluster has answered."""
    cfg = index_config(db)
    if cfg.backend == "opensearch":
        cfg = replace(cfg, prefix=parse_index(f"opensearch+{cfg.url}", db).prefix)
    return replace(cfg, database_id=secrets.token_hex(8), root=_here(db))
