"""What makes a batch run resumable: the checkpoint, one fsync'ed JSON line per finished row (rules:
ragkit.evaluate.batch's module docstring); its questions run in ragkit.core.workers.DaemonPool, whose threads
Ctrl-C never waits for."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd

from ragkit.core.config import Settings
from ragkit.core.errors import RagError
from ragkit.core.provenance import endpoint
from ragkit.evaluate.scoring import OPTIMIZED

CHECKPOINT_DIR = ".checkpoints"
_CK_VERSION = 1


# -- the checkpoint -----------------------------------------------------------------------------------
class Checkpoint:
    """Append-only JSON lines, one per finished row, fsync'ed; locked against a second process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = None
        self.existed = False  # the file was there before this run opened it (set by run_batch)

    def load(self) -> dict[int, dict]:
        """The last readable record per input position. A torn last line is cut off."""
        if not self.path.is_file():
            return {}
        data = self.path.read_bytes()
        good_end = data.rfind(b"\n") + 1
        records: dict[int, dict] = {}
        for line in data[:good_end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("v") == _CK_VERSION and isinstance(rec.get("i"), int):
                records[rec["i"]] = rec
        if good_end < len(data):  # a line cut short by a crash: drop it so the next append starts clean
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
        return records

    def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open for the whole run
        except OSError as e:
            raise RagError(f"{self.path}: cannot write the checkpoint ({e.strerror or e})") from None
        try:
            import fcntl

            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - Windows: no advisory lock
            pass
        except BlockingIOError:
            self._fh.close()
            self._fh = None
            raise RagError(f"{self.path}: another `rag batch` is running on this input; wait for it "
                           "or stop it first") from None
        except OSError:  # a filesystem without locks: run unlocked
            pass

    def append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str).encode("utf-8") + b"\n"
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def finish(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        settings_path(self.path).unlink(missing_ok=True)


# the settings that change answers: a run resumes only into rows answered with the same ones
ANSWER_SETTINGS = ("strategy", "k", "context_tokens", "max_steps", "max_tokens", "start_pages", "embeddings")
_SETTINGS_SUFFIX = ".settings.json"


def checkpoint_material(settings: Settings, input_csv: Path | None, df: pd.DataFrame, *, strategy: str,
                        k: int | None = None, embeddings: str | None = None) -> dict:
    """What a checkpoint is keyed on: the input (path and content), the database, who answers and judges, and
    every setting that changes answers (ANSWER_SETTINGS); a change to any of them starts a new run."""
    cols = [c for c in df.columns if c != OPTIMIZED]
    content = hashlib.sha256(json.dumps([cols, df[cols].values.tolist()], ensure_ascii=False).encode()).hexdigest()
    return {
        "input": str(Path(input_csv).resolve()) if input_csv is not None else "(in memory)",
        "content": content,
        "db": str(Path(settings.db).resolve()),
        "strategy": strategy,
        "provider": settings.provider,
        "model": settings.model,
        "judge_model": settings.judge_model,
        "api_base": endpoint(settings.api_base),  # never its credentials (the settings are stored beside the run)
        "k": k,
        "context_tokens": settings.context_tokens,
        "max_steps": settings.max_steps,
        "max_tokens": settings.max_tokens,
        "start_pages": settings.start_pages,
        "embeddings": embeddings,
    }


def checkpoint_path(settings: Settings, input_csv: Path | None, df: pd.DataFrame, *, strategy: str,
                    material: dict | None = None) -> Path:
    """`<results>/.checkpoints/<input stem>-<key>.jsonl`, key = a hash of checkpoint_material."""
    if material is None:
        material = checkpoint_material(settings, input_csv, df, strategy=strategy)
    key = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]
    from ragkit.core.paths import sanitize_name

    stem = sanitize_name(Path(input_csv).stem if input_csv is not None else "questions", fallback="input",
                         max_len=60)
    return Path(settings.results) / CHECKPOINT_DIR / f"{stem}-{key}.jsonl"


def settings_path(checkpoint: Path) -> Path:
    """Beside each checkpoint, the material it was keyed on (to say why another run did not resume it)."""
    return checkpoint.with_name(checkpoint.stem + _SETTINGS_SUFFIX)


def write_material(checkpoint: Path, material: dict) -> None:
    from ragkit.core.paths import atomic_write_text

    try:
        atomic_write_text(settings_path(checkpoint), json.dumps(material, ensure_ascii=False, indent=1) + "\n")
    except OSError:
        pass  # only an explanation for a later run: the checkpoint itself still works


def recorded_settings(other: Path) -> dict | None:
    """The material the unfinished checkpoint `other` was keyed on, None when it has no readable record of it
    (written before the settings were recorded)."""
    try:
        theirs = json.loads(settings_path(other).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return theirs if isinstance(theirs, dict) else None


def unfinished_note(input_csv: Path | str, material: dict, others: list[Path], *, starting: bool = True) -> str:
    """One line naming the unfinished run(s) of the same input this run does not resume, and which of their
    settings differ, so that a user who meant to resume knows why a new run started (`starting`: the line says
    a new run starts; else it only describes them, for the error of --resume)."""
    same_input = []
    for p in sorted(others, key=lambda p: p.stat().st_mtime if p.exists() else 0, reverse=True):
        theirs = recorded_settings(p)
        if theirs is not None and theirs.get("input") == material["input"]:
            same_input.append((p, theirs))
    if not same_input:
        what = f"{len(others)} unfinished run(s) of {Path(input_csv).name} with other content or settings are in " \
               f"{others[0].parent}"
        return f"note: {what}; starting a new run" if starting else what
    p, theirs = same_input[0]
    diff = [k for k in material if theirs.get(k) != material[k]]  # "content": the input was edited

    def value(k: str, v: object) -> object:  # a record written before api_base was stored bare may hold a password
        return endpoint(v) if k == "api_base" and isinstance(v, str) else v

    shown = ", ".join("the input's content" if k == "content" else
                      f"{k} {value(k, theirs.get(k))} -> {value(k, material[k])}" for k in diff) or "nothing recorded"
    more = f" (and {len(others) - 1} other unfinished run(s))" if len(others) > 1 else ""
    if not starting:
        return f"the unfinished run {p} has other settings ({shown}){more}"
    return (f"note: not resuming the unfinished run {p} ({shown}); starting a new run with these settings{more}; "
            "the same command as that run's resumes it")
