"""One settings object. Precedence: flags, then environment, then `.env` in the working directory."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from stat import S_ISREG

from dotenv import dotenv_values

PROVIDERS = ("openai", "offline")
DEFAULT_MODEL = "gpt-4o-mini"


@dataclass(frozen=True)
class Limit:
    """One limit on what a document may cost: its field in `Limits`, flag, environment variable, unit."""

    field: str
    flag: str
    env: str
    unit: str
    what: str

    def names(self) -> str:
        """How a message names the setting: `--max-member-mb / RAG_MAX_MEMBER_MB`."""
        return f"{self.flag} / {self.env}"


# Defaults measured on ../shared/bench (docs/ingest.md, benchmarks/limits.py): none trips on its 88 PDFs.
LIMITS = (
    Limit("unpacked_mb", "--max-unpacked-mb", "RAG_MAX_UNPACKED_MB", "MB", "all members of a DOCX/PPTX, unpacked"),
    Limit("member_mb", "--max-member-mb", "RAG_MAX_MEMBER_MB", "MB", "one member of a DOCX/PPTX, unpacked"),
    Limit("zip_ratio", "--max-zip-ratio", "RAG_MAX_ZIP_RATIO", "", "unpacked/packed size of a DOCX/PPTX member"),
    Limit("page_text_mb", "--max-page-text-mb", "RAG_MAX_PAGE_TEXT_MB", "MB", "text one PDF page shows"),
    Limit("doc_seconds", "--doc-timeout", "RAG_DOC_TIMEOUT", "s", "wall time to convert one document"),
    Limit("memory_mb", "--max-doc-memory-mb", "RAG_MAX_DOC_MEMORY_MB", "MB", "memory one conversion may use"),
)
LIMIT_BY_FIELD = {lim.field: lim for lim in LIMITS}


@dataclass(frozen=True)
class Limits:
    """What converting one document may cost, the same in `rag ingest`, `rag serve` uploads and genqa's
    sources. A document past one fails with a line naming the limit and its setting; the others go on."""

    unpacked_mb: float = 512.0
    member_mb: float = 256.0
    zip_ratio: float = 100.0
    page_text_mb: float = 4.0
    doc_seconds: float = 300.0
    memory_mb: float = 1024.0

    def with_(self, **changes) -> Limits:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def tripped(field: str, value: float) -> str:
    """The end of a message for a limit a document went past: `(limit 256 MB: --max-member-mb /
    RAG_MAX_MEMBER_MB)`."""
    lim = LIMIT_BY_FIELD[field]
    unit = f" {lim.unit}" if lim.unit else ""
    return f"(limit {value:g}{unit}: {lim.names()})"


class Secret(str):
    """A string that never shows itself in repr/str formatting of containers or logs."""

    def __repr__(self) -> str:
        return "Secret('***')" if self else "Secret('')"


@dataclass(frozen=True)
class Settings:
    db: Path = Path("database")
    results: Path = Path("results")
    provider: str = "offline"
    provider_reason: str = ""  # why this provider was chosen, shown to the user
    model: str = DEFAULT_MODEL
    judge_model: str = DEFAULT_MODEL
    api_key: Secret = field(default=Secret(""), repr=False)
    api_base: str | None = field(default=None, repr=False)  # may hold a password: shown via provenance.endpoint
    workers: int = 5
    cache: bool = True
    cache_dir: Path = Path(".ragkit/cache")
    timeout: float = 60.0  # seconds per LLM HTTP request [env RAG_TIMEOUT]
    retry_base_delay: float = 1.0  # first backoff wait (s); doubles per attempt, plus jitter
    retry_max_delay: float = 20.0  # cap on any single wait, including a server's Retry-After
    max_steps: int = 12  # agent: tool-using turns per question [env RAG_MAX_STEPS]
    max_tokens: int = 60_000  # agent: input+output tokens per question [env RAG_MAX_TOKENS]
    context_tokens: int = 32_000  # longctx: tokens of whole documents put in the context [env RAG_CONTEXT_TOKENS]
    limits: Limits = Limits()  # what converting one document may cost [env RAG_MAX_*, RAG_DOC_TIMEOUT]
    csv_encoding: str | None = None  # --encoding: read input CSVs in this encoding [env RAG_CSV_ENCODING]
    start_pages: int = 5  # agent: N > 0 starts it with the question searched and its top N pages read (fewer
    # model calls, and a weak model reads); 0 = from the bare tree, reading what it chooses [env RAG_START_PAGES]

    def with_(self, **changes) -> Settings:
        return replace(self, **changes)


_DOTENV_CACHE: dict[Path, tuple[tuple[int, int], dict[str, str]]] = {}


def _dotenv(path: Path) -> dict[str, str]:
    """The settings in a `.env` file ({} when there is none), parsed again only when the file changes."""
    path = path.absolute()
    try:
        st = path.stat()
    except OSError:
        return {}
    if not S_ISREG(st.st_mode):
        return {}
    key = (st.st_mtime_ns, st.st_size)
    cached = _DOTENV_CACHE.get(path)
    if cached is None or cached[0] != key:
        values = {k: v for k, v in dotenv_values(path).items() if v is not None}
        _DOTENV_CACHE[path] = cached = (key, values)
    return cached[1]


def _env(env_file: Path | None = None) -> dict[str, str]:
    """Environment over `.env` (the process environment wins)."""
    merged = dict(_dotenv(env_file if env_file is not None else Path(".env")))
    merged.update(os.environ)
    return merged


def env_value(name: str) -> str | None:
    """One setting from the environment, else from `.env` in the working directory (for settings read
    deep inside the library, e.g. RAG_EMBED by the index)."""
    if name in os.environ:
        return os.environ[name]
    return _dotenv(Path(".env")).get(name)


def env_limits(env_file: Path | None = None) -> Limits:
    """The document limits the environment and `.env` give (RAG_DOC_TIMEOUT, RAG_MAX_*), as load_settings reads
    them: what a library call that was given no limits uses, so the same environment gives the same limits from
    Python as from the CLI."""
    return _limits(_env(env_file), {})


def load_settings(
    *,
    db: Path | str | None = None,
    results: Path | str | None = None,
    provider: str | None = None,
    model: str | None = None,
    judge_model: str | None = None,
    workers: int | None = None,
    cache: bool | None = None,
    max_steps: int | None = None,
    max_tokens: int | None = None,
    context_tokens: int | None = None,
    start_pages: int | None = None,
    limits: dict[str, float | None] | None = None,
    encoding: str | None = None,
    env_file: Path | None = None,
) -> Settings:
    """Build Settings from flags (arguments), then env, then `.env`.

    With no key and no explicit provider the provider is ``offline`` and ``provider_reason`` says why.
    """
    from ragkit.core.errors import UsageError

    env = _env(env_file)
    key = Secret(env.get("OPENAI_API_KEY", "").strip())
    chosen = provider or env.get("RAG_PROVIDER") or None
    if chosen is None:
        chosen = "openai" if key else "offline"
        reason = "OPENAI_API_KEY is set" if key else "no OPENAI_API_KEY set; running offline"
    else:
        reason = "--provider" if provider else "RAG_PROVIDER"
    chosen = chosen.strip().lower()
    if chosen not in PROVIDERS:
        raise UsageError(f"unknown provider {chosen!r}: choose one of {', '.join(PROVIDERS)}")
    if workers is not None and workers < 1:
        raise UsageError(f"workers must be at least 1, got {workers}", flags={"workers": "--workers"})
    steps = max_steps if max_steps is not None else _positive_int(env.get("RAG_MAX_STEPS"), "RAG_MAX_STEPS", 12)
    tokens = (max_tokens if max_tokens is not None
              else _positive_int(env.get("RAG_MAX_TOKENS"), "RAG_MAX_TOKENS", 60_000))
    if steps < 1 or tokens < 1:
        raise UsageError("max_steps and max_tokens must be at least 1",
                         flags={"max_steps": "--max-steps", "max_tokens": "--max-tokens"})
    context = (context_tokens if context_tokens is not None
               else _positive_int(env.get("RAG_CONTEXT_TOKENS"), "RAG_CONTEXT_TOKENS", 32_000))
    if context < 1:
        raise UsageError(f"context_tokens must be at least 1, got {context}", flags={"context_tokens": "--context-tokens"})
    start = (start_pages if start_pages is not None
             else _positive_int(env.get("RAG_START_PAGES"), "RAG_START_PAGES", 5, minimum=0))
    if start < 0:
        raise UsageError(f"start_pages must be 0 or more, got {start}")
    default_model = env.get("RAG_MODEL") or DEFAULT_MODEL
    csv_encoding = check_encoding(encoding if encoding is not None else env.get("RAG_CSV_ENCODING"),
                                  "encoding" if encoding is not None else "RAG_CSV_ENCODING")
    return Settings(
        db=Path(db or env.get("RAG_DB") or "database"),
        results=Path(results or env.get("RAG_RESULTS") or "results"),
        provider=chosen,
        provider_reason=reason,
        model=model or default_model,
        judge_model=judge_model or env.get("RAG_JUDGE_MODEL") or default_model,
        api_key=key,
        api_base=(env.get("OPENAI_API_BASE") or env.get("OPENAI_BASE_URL") or None),
        workers=workers or _positive_int(env.get("RAG_WORKERS"), "RAG_WORKERS", 5),
        cache=True if cache is None else cache,
        cache_dir=Path(env.get("RAG_CACHE_DIR") or ".ragkit/cache"),
        timeout=_positive_float(env.get("RAG_TIMEOUT"), "RAG_TIMEOUT", 60.0),
        max_steps=steps,
        max_tokens=tokens,
        context_tokens=context,
        start_pages=start,
        limits=_limits(env, limits or {}),
        csv_encoding=csv_encoding,
    )


def _limits(env: dict[str, str], flags: dict[str, float | None]) -> Limits:
    """Each limit from its flag, else its environment variable, else the default; each must be positive."""
    from ragkit.core.errors import UsageError

    values: dict[str, float] = {}
    for lim in LIMITS:
        flag = flags.get(lim.field)
        if flag is not None:
            if not flag > 0:
                raise UsageError(f"{lim.flag} must be positive, got {flag:g}")
            values[lim.field] = float(flag)
            continue
        raw = env.get(lim.env)
        if raw is None or not raw.strip():
            continue
        try:
            value = float(raw)
        except ValueError:
            raise UsageError(f"{lim.env} must be a number, got {raw!r}") from None
        if not value > 0 or value == float("inf"):
            raise UsageError(f"{lim.env} must be a positive number, got {raw!r}")
        values[lim.field] = value
    return Limits(**values)


def check_encoding(name: str | None, where: str = "encoding") -> str | None:
    """A codec name Python knows (`latin-1`, `cp1252`, `euc-jp`, `utf-16-le`), as given; None stays None."""
    import codecs

    from ragkit.core.errors import UsageError

    if name is None or not name.strip():
        return None
    try:
        codecs.lookup(name.strip())
        return name.strip()
    except LookupError:
        raise UsageError(f"{where}: unknown encoding {name.strip()!r} (e.g. utf-8, cp932, latin-1, cp1252, "
                         "euc-jp, utf-16-le)", flags={"encoding:": "--encoding:"}) from None


def _positive_float(raw: str | None, name: str, default: float) -> float:
    from ragkit.core.errors import UsageError

    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise UsageError(f"{name} must be positive, got {raw!r}")
    return value


def _positive_int(raw: str | None, name: str, default: int, *, minimum: int = 1) -> int:
    from ragkit.core.errors import UsageError

    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise UsageError(f"{name} must be at least {minimum}, got {raw!r}")
    return value
