"""Where things are: the pi binary, the agent dir, the project root; and the few settings.

Everything here is resolved on demand (not at import) so that changing an environment variable or
``nbsubagents.configure(...)`` takes effect for the next run.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, fields
from pathlib import Path

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


class NbSubagentsError(ValueError):
    """Base of the errors a user can fix; the message says what was wrong and what would be right."""


class PiNotFoundError(NbSubagentsError):
    pass


@dataclass
class Settings:
    """Process-wide settings; ``None`` means "derive it" (env var, then the project)."""

    pi: str | None = None          # path of the pi binary
    root: str | None = None        # project root holding .pi/subagents/runs
    concurrency: int = 4           # parallel children at once
    max_tasks: int = 16            # tasks per parallel call
    timeout: float = 600.0         # seconds per run, extended while the child is active
    extend_timeout_debounce: float = 30.0
    looping_tool_count: int = 5
    poll_interval: float = 0.05    # how often a waiting kernel looks at events.jsonl


settings = Settings()


def configure(**changes: object) -> Settings:
    """Change settings for this process: ``configure(concurrency=2, pi="/opt/pi")``."""
    known = {f.name for f in fields(Settings)}
    for key, value in changes.items():
        if key not in known:
            raise NbSubagentsError(f"Unknown setting {key!r}. Known settings: {', '.join(sorted(known))}")
        setattr(settings, key, value)
    return settings


def agent_dir() -> Path:
    """pi's agent dir: models, auth, settings and the global presets live here."""
    return Path(os.environ.get("PI_CODING_AGENT_DIR") or Path.home() / ".pi" / "agent").expanduser()


def find_pi(cwd: Path | None = None) -> str:
    """The pi binary: setting or NBSUBAGENTS_PI, the project's node_modules, then PATH."""
    explicit = settings.pi or os.environ.get("NBSUBAGENTS_PI")
    if explicit:
        if not Path(explicit).is_file():
            raise PiNotFoundError(f"pi not found at {explicit} (from the pi setting or NBSUBAGENTS_PI). "
                                  f"Point it at an existing pi binary, or unset it to search the project and PATH.")
        return explicit
    start = Path(cwd or Path.cwd()).resolve()
    for base in (start, *start.parents, PACKAGE_ROOT):
        candidate = base / "node_modules" / ".bin" / "pi"
        if candidate.is_file():
            return str(candidate)
    on_path = shutil.which("pi")
    if on_path:
        return on_path
    raise PiNotFoundError(
        "pi (the coding agent that runs each sub-agent) was not found: looked at NBSUBAGENTS_PI, "
        "node_modules/.bin/pi of the project and PATH. Install it with "
        f"`npm install {PI_PACKAGE}@{PI_VERSION}` in the project (or globally with -g), "
        "or set NBSUBAGENTS_PI to its path."
    )


def project_root(cwd: Path | None = None) -> Path:
    """Nearest ancestor with a .pi/ folder (not the home folder's, which holds pi's own agent dir)."""
    explicit = settings.root or os.environ.get("NBSUBAGENTS_ROOT")
    if explicit:
        return Path(explicit).expanduser().resolve()
    start = Path(cwd or Path.cwd()).resolve()
    home = Path.home().resolve()
    for base in (start, *start.parents):
        if base != home and (base / ".pi").is_dir():
            return base
    return start
