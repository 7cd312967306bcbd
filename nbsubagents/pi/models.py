"""Which models pi can use here, and which one a run gets.

pi only warns about an unknown model and runs anyway, so a typo would surface as a confusing
provider error minutes later; we check up front against ``pi --list-models`` (the models whose
provider is configured) and resolve the name the way ``pi --model`` does: ``provider/id``, a bare
id, a part of an id such as ``sonnet`` (an alias without a date wins, else the latest dated one),
with an optional ``:thinking`` suffix. The child then gets the canonical ``provider/id``.

Asking pi costs a pi start-up (~0.6 s and more), so the answer is cached in memory and on disk
(``$XDG_CACHE_HOME/nbsubagents/models.json``), keyed by files only: pi's package.json (path, mtime,
size), the agent dir's models.json, auth.json, settings.json and models-store.json (pi 1.x's cached remote
catalogues; mtime, size), and the *names* of the provider key variables that are set (never their values).
A fresh kernel whose pi and providers did not change resolves a model without starting pi; whatever pi version it
is, the list is pi's own answer, never a reading of pi's internals.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import NbSubagentsError, agent_dir
from .locate import pi_command, pi_package

_cache: dict[str, tuple[str, ...]] = {}
_lock = threading.Lock()
CACHE_VERSION = 1
_CACHE_ENTRIES = 32
THINKING_SUFFIXES = ("off", "minimal", "low", "medium", "high", "xhigh")
# Variables pi reads provider credentials from (pi-ai's env-api-keys and providers, pi 1.x's llama.cpp
# LLAMA_BASE_URL): only whether they are set matters.
_KEY_VARIABLE = re.compile(r"(_API_KEY|_TOKEN|_KEY|_KEY_ID|_PROFILE|_CREDENTIALS|_BASE_URL)$"
                           r"|^(AWS_|GOOGLE_|GCLOUD_|AZURE_|ANTHROPIC_|CLOUDFLARE_)")
_DATED = re.compile(r"-\d{8}$")
MAX_SUGGESTIONS = 10

NO_PROVIDER_HINT = (
    "pi has no model whose provider is configured. Configure one: set a provider key in the environment "
    "(e.g. export ANTHROPIC_API_KEY=...), or run `pi` once and log in with /login, or add a provider to "
    "{models_json}; or try it offline on the scripted model: the project's \"offline\": true setting "
    "(`nbsubagents init --offline`), or nbsubagents.demo.use_scripted_model() for this process."
)


class ModelError(NbSubagentsError):
    pass


@dataclass(frozen=True)
class ModelChoice:
    """The model of one run: what was asked for (and where), and what pi will use."""

    requested: str | None   # as written: the call's model= or the preset's model: (None: neither, offline)
    source: str | None      # "call" or "preset"
    resolved: str           # canonical provider/id
    thinking: str | None    # a :thinking suffix of the request, passed on to pi

    @property
    def argv_model(self) -> str:
        return f"{self.resolved}:{self.thinking}" if self.thinking else self.resolved

    @property
    def provider(self) -> str:
        return self.resolved.split("/", 1)[0]


# --- the cache --------------------------------------------------------------------------------


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "nbsubagents" / "models.json"


def _stamp(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def state_key(pi: str, adir: Path | None = None) -> str:
    """A digest of everything the model list depends on; files and variable names only, never values."""
    adir = agent_dir() if adir is None else adir
    package = pi_package(pi)
    parts = {
        "v": CACHE_VERSION,
        "pi": os.path.realpath(pi),
        "command": pi_command(pi)[:-1],  # the node that runs it, when it has its own
        "package": [str(package.path), _stamp(package.path)] if package else None,
        "agentDir": str(adir),
        "files": {name: _stamp(adir / name)
                  for name in ("models.json", "auth.json", "settings.json", "models-store.json")},
        "keys": sorted(k for k, v in os.environ.items() if v and _KEY_VARIABLE.search(k)),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _read_disk() -> dict[str, dict]:
    try:
        data = json.loads(cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _disk_get(key: str) -> tuple[str, ...] | None:
    entry = _read_disk().get(key)
    if isinstance(entry, dict) and isinstance(entry.get("models"), list):
        return tuple(str(m) for m in entry["models"])
    return None


def _disk_put(key: str, models: tuple[str, ...]) -> None:
    """Best effort: a cache that cannot be written only costs the next kernel a pi start-up."""
    path = cache_file()
    data = _read_disk()
    data[key] = {"models": list(models), "at": time.time()}
    newest = sorted(data.items(), key=lambda kv: kv[1].get("at", 0) if isinstance(kv[1], dict) else 0)
    data = dict(newest[-_CACHE_ENTRIES:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def remember(key: str, models: tuple[str, ...]) -> None:
    """Keep ``models`` as the answer for ``key`` (``state_key``), in this process and on disk."""
    _disk_put(key, models)
    with _lock:
        _cache[key] = models


def clear_cache() -> None:
    """Forget the model lists (this process's and the disk's)."""
    with _lock:
        _cache.clear()
    try:
        cache_file().unlink()
    except OSError:
        pass


# --- asking pi --------------------------------------------------------------------------------


def parse_model_table(text: str) -> tuple[str, ...]:
    """``pi --list-models`` prints an aligned table (provider, model, context, max-out, thinking, images) after
    a header line; anything else it prints (``No models available. ...``, pi 1.x's warnings on stderr, which
    follows the table here because pi 0.73.1 prints the table there) is not a model."""
    models = []
    seen_header = False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "provider" and parts[1] == "model":
            seen_header = True
        elif seen_header and len(parts) == 6 and parts[4] in ("yes", "no") and parts[5] in ("yes", "no"):
            models.append(f"{parts[0]}/{parts[1]}")
    return tuple(models)


def failure_line(text: str) -> str:
    """The line that says why pi failed: the last one naming an error (node prints its version last), else the last."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error" in ln or "error:" in ln.lower()]
    return ((errors or lines or [""])[-1])[:300]


def ask_pi(pi: str) -> tuple[str, ...]:
    """pi's table, written to files: pi exits right after writing it, and into a pipe a long table is then cut
    short at random (seen with every provider configured: 575 of 959 models)."""
    import tempfile  # noqa: PLC0415 (start-up: only a list pi must give loads it)

    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        try:
            proc = subprocess.run([*pi_command(pi), "--list-models"], stdin=subprocess.DEVNULL, stdout=stdout,
                                  stderr=stderr, timeout=60, env={**os.environ, "PI_OFFLINE": "1"})
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ModelError(f"Could not ask pi ({pi}) which models it has: {exc}. "
                             "Check the pi installation with `nbsubagents doctor`.") from None
        out, err = _read_all(stdout), _read_all(stderr)
    if proc.returncode != 0:
        raise ModelError(f"pi ({pi}) failed to list its models (exit code {proc.returncode}): "
                         f"{failure_line(err) or failure_line(out)}. "
                         "Check the pi installation with `nbsubagents doctor`.")
    return parse_model_table(out + "\n" + err)


def _read_all(file) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")


def available_models(pi: str) -> tuple[str, ...]:
    """The ``provider/id`` of every model pi can use here (its provider is configured)."""
    adir = agent_dir()
    key = state_key(pi, adir)
    with _lock:
        if key in _cache:
            return _cache[key]
    models = _disk_get(key)
    if models is None:
        models = ask_pi(pi)
        after = state_key(pi, adir)  # pi may have just created auth.json or settings.json: key what it left
        if after != key:
            remember(after, models)
    remember(key, models)
    return models


# --- resolving a name the way `pi --model` does --------------------------------------------------


def _is_alias(model_id: str) -> bool:
    return model_id.endswith("-latest") or not _DATED.search(model_id)


def _exact(reference: str, pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
    lower = reference.strip().lower()
    canonical = [p for p in pairs if f"{p[0]}/{p[1]}".lower() == lower]
    if len(canonical) == 1:
        return canonical[0]
    ids = [p for p in pairs if p[1].lower() == lower]
    return ids[0] if len(ids) == 1 else None


def _try_match(pattern: str, pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
    exact = _exact(pattern, pairs)
    if exact:
        return exact
    lower = pattern.lower()
    matches = [p for p in pairs if lower in p[1].lower()]
    if not matches:
        return None
    aliases = [p for p in matches if _is_alias(p[1])]
    return max(aliases or matches, key=lambda p: p[1])  # the alias sorting highest, else the latest dated id


def _parse_pattern(pattern: str, pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], str | None] | None:
    found = _try_match(pattern, pairs)
    if found:
        return found, None
    prefix, colon, suffix = pattern.rpartition(":")
    if colon and suffix in THINKING_SUFFIXES:
        inner = _parse_pattern(prefix, pairs)
        if inner:
            return inner[0], inner[1] or suffix
    return None


def match_model(name: str, available: tuple[str, ...] | list[str]) -> tuple[str, str | None] | None:
    """``(provider/id, thinking suffix)`` for a model name as ``pi --model`` reads it, or None."""
    if not name or not name.strip():
        return None
    pairs = [(m.split("/", 1)[0], m.split("/", 1)[1]) for m in available if "/" in m]
    lower = name.strip().lower()
    for provider, model_id in pairs:
        if f"{provider}/{model_id}".lower() == lower:
            return f"{provider}/{model_id}", None
    providers = {p.lower(): p for p, _ in pairs}
    provider = None
    pattern = name.strip()
    head, slash, rest = pattern.partition("/")
    if slash and head.lower() in providers:
        provider, pattern = providers[head.lower()], rest
    else:
        exact = [p for p in pairs if p[1].lower() == lower]
        if exact:
            return f"{exact[0][0]}/{exact[0][1]}", None
    candidates = [p for p in pairs if provider is None or p[0] == provider]
    found = _parse_pattern(pattern, candidates)
    if found is None and provider is not None:  # an id that itself contains a slash, on another provider
        found = _parse_pattern(name.strip(), pairs)
    if found is None:
        return None
    (p, i), thinking = found
    return f"{p}/{i}", thinking


def closest_models(name: str, available: tuple[str, ...] | list[str], limit: int = MAX_SUGGESTIONS) -> list[str]:
    """The ``limit`` available models most like ``name`` (by the whole name and by the id alone)."""
    lower = name.lower().rsplit(":", 1)[0] if name.rsplit(":", 1)[-1] in THINKING_SUFFIXES else name.lower()

    def score(model: str) -> float:
        whole = difflib.SequenceMatcher(None, lower, model.lower()).ratio()
        part = difflib.SequenceMatcher(None, lower.rsplit("/", 1)[-1], model.split("/", 1)[-1].lower()).ratio()
        return max(whole, part) + (0.5 if lower.rsplit("/", 1)[-1] in model.lower() else 0)

    return sorted(available, key=lambda m: (-score(m), m))[:limit]


def unknown_model_message(name: str, source: str, available: tuple[str, ...]) -> str:
    head = f'Unknown model "{name}" (from {source})'
    if not available:
        return f"{head}: " + NO_PROVIDER_HINT.format(models_json=agent_dir() / "models.json")
    close = closest_models(name, available)
    listing = ", ".join(close)
    if len(available) <= len(close):
        return f"{head}. Available models ({len(available)}): {listing}"
    return (f"{head}. pi has {len(available)} models; the closest: {listing}. "
            "`nbsubagents doctor` or `pi --list-models` lists them all.")


def choose_model(requested: str | None, preset_name: str, preset_model: str | None, pi: str) -> ModelChoice:
    """Call ``model=`` wins over the preset's ``model``; the name must be one pi resolves to a usable model."""
    chosen = requested or preset_model
    if not chosen or not chosen.strip():
        raise ModelError(f'No model for preset "{preset_name}": pass model="provider/id" to the call, '
                         f"or add a `model:` line to the preset's frontmatter.")
    if chosen.strip() == "inherit":
        raise ModelError(f'No model for preset "{preset_name}": "inherit" means the caller\'s model, and a '
                         'notebook has none; pass model="provider/id" to the call.')
    available = available_models(pi)
    found = match_model(chosen, available)
    source = "the call's model=" if requested else f'preset "{preset_name}"'
    if found is None:
        raise ModelError(unknown_model_message(chosen, source, available))
    resolved, thinking = found
    return ModelChoice(requested=chosen, source="call" if requested else "preset", resolved=resolved,
                       thinking=thinking)
