"""Which models pi can use here, and which one a run gets.

pi only warns about an unknown model and runs anyway, so a typo would surface as a confusing
provider error minutes later; we check up front against ``pi --list-models`` (the models whose
provider is configured) and resolve the name the way ``pi --model`` does: ``provider/id``, a bare
id, a part of an id such as ``sonnet`` (an alias without a date wins, else the latest dated one),
with an optional ``:thinking`` suffix. The child then gets the canonical ``provider/id``. A dated Anthropic id pi
does not list (Claude Code agent files carry ``claude-sonnet-4-20250514``) gets the nearest model of its family
(``nearest_model``), and the run's record says so.

Asking pi (its harness's ``models``) costs a pi start-up (~0.6 s and more), so the answer is cached in memory and
on disk (``$XDG_CACHE_HOME/nbsubagents/models.json``), keyed by what the harness's ``models_key`` says the list
depends on: for pi, files only (its script, the agent dir's models.json, auth.json, settings.json and
models-store.json) and the *names* of the provider key variables that are set (never their values). A fresh kernel
whose pi and providers did not change resolves a model without starting pi; whatever pi version it is, the list is
pi's own answer, never a reading of pi's internals.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .._child import harnesses
from .._child.harnesses import Harness
from .._config import NbSubagentsError, agent_dir

_cache: dict[str, tuple[str, ...]] = {}
_lock = threading.Lock()
_CACHE_ENTRIES = 32
THINKING_SUFFIXES = ("off", "minimal", "low", "medium", "high", "xhigh")
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
    note: str | None = None  # why ``resolved`` is not what was asked for (a dated id pi does not have: its nearest)

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
    """Keep ``models`` as the answer for ``key`` (a harness's ``models_key``), in this process and on disk."""
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


def available_models(program: str, harness: Harness | None = None) -> tuple[str, ...]:
    """The ``provider/id`` of every model ``harness`` (default: pi) can use here, as its program lists them;
    cached by what the list depends on (the harness's ``models_key``)."""
    harness = harness or harnesses.get(harnesses.DEFAULT)
    key = harness.models_key(program)
    with _lock:
        if key in _cache:
            return _cache[key]
    models = _disk_get(key)
    if models is None:
        try:
            models = tuple(harness.models(program))
        except ValueError as exc:
            raise ModelError(str(exc)) from None
        after = harness.models_key(program)  # pi may have just created auth.json or settings.json: key what it left
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


_CLAUDE_DATED = re.compile(r"^claude-[a-z0-9-]+-\d{8}$")


def _claude_family(model_id: str) -> tuple[str, tuple[int, ...]] | None:
    """``claude-sonnet-4-5-20250929`` -> ("sonnet", (4, 5)); the older ``claude-3-5-haiku-20241022`` -> ("haiku",
    (3, 5)); ``claude-opus-4-0`` -> ("opus", (4,)). None for an id of another shape."""
    parts = model_id.lower().split("-")
    if parts[0] != "claude":
        return None
    parts = [p for p in parts[1:] if not re.fullmatch(r"\d{8}|latest", p)]
    words = [p for p in parts if not p.isdigit()]
    if len(words) != 1 or not parts:
        return None
    version = [int(p) for p in parts if p.isdigit()]
    while version and version[-1] == 0:
        version.pop()
    return words[0], tuple(version)


def nearest_model(name: str, available: tuple[str, ...] | list[str]) -> str | None:
    """For a dated Anthropic id pi does not list (``claude-sonnet-4-20250514``, all 0xfurai agents' model, gone from
    pi 1.x's list): the ``provider/id`` of the nearest model of its family (sonnet, opus, haiku, ...): the lowest
    version at or above it, else the highest below; an alias over a dated id, the requested provider (else
    ``anthropic``) over others. None for any other name, or a family pi has no model of."""
    provider, _, model_id = name.strip().rpartition("/")
    wanted = _claude_family(model_id) if _CLAUDE_DATED.match(model_id.lower()) else None
    if wanted is None:
        return None
    family, version = wanted
    found = [(m, known[1]) for m in available if "/" in m
             and (known := _claude_family(m.split("/", 1)[1])) is not None and known[0] == family]
    if not found:
        return None
    at_or_above = [v for _, v in found if v >= version]
    best = min(at_or_above) if at_or_above else max(v for _, v in found)

    def rank(model: str) -> tuple[bool, bool, bool, str]:
        head, model_id = model.split("/", 1)
        return (head == provider if provider else False, head == "anthropic", _is_alias(model_id), model_id)

    return max((m for m, v in found if v == best), key=rank)


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


def resolve_name(name: str, available: tuple[str, ...] | list[str], source: str,
                 what: str = "model") -> tuple[tuple[str, str | None], str | None]:
    """``name`` among ``available`` (``match_model``'s ``(provider/id, thinking)``), or else a dated Anthropic id's
    nearest with the note that says so; a name neither finds is a ModelError naming the closest."""
    found = match_model(name, available)
    if found is not None:
        return found, None
    nearest = nearest_model(name, available)
    if nearest is None:
        raise ModelError(unknown_model_message(name, source, available))
    return (nearest, None), (f'{what} "{name.strip()}" (from {source}) is not one pi has here; its nearest, '
                             f"{nearest}, is used (pi's models: `pi --list-models`)")


def choose_model(requested: str | None, preset_name: str, preset_model: str | None, program: str,
                 harness: Harness | None = None) -> ModelChoice:
    """Call ``model=`` wins over the preset's ``model``; the name must be one pi resolves to a usable model."""
    chosen = requested or preset_model
    if not chosen or not chosen.strip():
        raise ModelError(f'No model for preset "{preset_name}": pass model="provider/id" to the call, '
                         f"or add a `model:` line to the preset's frontmatter.")
    if chosen.strip() == "inherit":
        raise ModelError(f'No model for preset "{preset_name}": "inherit" means the caller\'s model, and a '
                         'notebook has none; pass model="provider/id" to the call.')
    source = "the call's model=" if requested else f'preset "{preset_name}"'
    (resolved, thinking), note = resolve_name(chosen, available_models(program, harness), source)
    return ModelChoice(requested=chosen, source="call" if requested else "preset", resolved=resolved,
                       thinking=thinking, note=note)
