"""Which models pi can use here, and which one a run gets.

pi only warns about an unknown model and runs anyway, so a typo would surface as a confusing
provider error minutes later; we check up front against ``pi --list-models``. That call costs a
pi start-up (~0.6 s), so its answer is cached per pi binary and agent-dir state.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from .config import NbSubagentsError, agent_dir

_cache: dict[tuple, tuple[str, ...]] = {}
_lock = threading.Lock()


class ModelError(NbSubagentsError):
    pass


def _state_key(pi: str, adir: Path) -> tuple:
    stamps = []
    for name in ("models.json", "auth.json", "settings.json"):
        try:
            st = (adir / name).stat()
            stamps.append((name, st.st_mtime_ns, st.st_size))
        except OSError:
            stamps.append((name, None, None))
    keys = tuple(sorted(k for k in os.environ if k.endswith(("_API_KEY", "_TOKEN"))))
    return (pi, str(adir), tuple(stamps), keys)


def parse_model_table(text: str) -> tuple[str, ...]:
    """``pi --list-models`` prints an aligned table: provider, model, context, ..."""
    models = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] != "provider":
            models.append(f"{parts[0]}/{parts[1]}")
    return tuple(models)


def available_models(pi: str) -> tuple[str, ...]:
    adir = agent_dir()
    key = _state_key(pi, adir)
    with _lock:
        if key in _cache:
            return _cache[key]
    try:
        proc = subprocess.run([pi, "--list-models"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60, env={**os.environ, "PI_OFFLINE": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelError(f"Could not ask pi ({pi}) which models it has: {exc}. "
                         "Check the pi installation with `nbsubagents doctor`.") from None
    models = parse_model_table(proc.stdout.decode(errors="replace") + "\n" + proc.stderr.decode(errors="replace"))
    with _lock:
        _cache[key] = models
        _cache[_state_key(pi, adir)] = models  # pi may have just created auth.json: key the state it left
    return models


def resolve_model(requested: str | None, preset_name: str, preset_model: str | None, pi: str) -> str:
    """Call ``model=`` wins over the preset's ``model``; the result must be a model pi has."""
    chosen = requested or preset_model
    if not chosen:
        raise ModelError(f'No model for preset "{preset_name}": pass model="provider/id" to the call, '
                         f"or add a `model:` line to the preset's frontmatter.")
    available = available_models(pi)
    base = chosen.rsplit(":", 1)[0] if ":" in chosen.split("/")[-1] else chosen  # drop a :thinking suffix
    if base in available or (("/" not in base) and sum(m.split("/", 1)[1] == base for m in available) == 1):
        return chosen
    listing = ", ".join(available) if available else "none (configure a provider for pi: models.json or an API key)"
    source = "the call's model=" if requested else f'preset "{preset_name}"'
    raise ModelError(f'Unknown model "{chosen}" (from {source}). Available models: {listing}')
