"""Presets made and changed from code: new, edit, copy, delete, and a whole file's text (the magic's cell).

Every write goes through ``_commit``: the text is written to a hidden folder beside its target, read back by
``parse_preset`` (the parser discovery uses), and only then moved into place. A bad field is the parser's error,
naming the field and its right form, and nothing is written. Fields are written in pi's camelCase spelling; a
caller may name them either way (``max_tool_calls=2`` or ``maxToolCalls=2``: ``parse.SNAKE_CASE``).
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import yaml

from .._config import project_root
from .._child.harnesses.pi import classify_tool
from .discover import claimed_name, notes, preset_files, scan
from .locations import find_project_presets_dir, global_presets_dir, resolve_cwd
from .parse import (
    IGNORED_KEYS,
    KNOWN_KEYS,
    SNAKE_CASE,
    Preset,
    PresetError,
    PresetWarning,
    one_spelling,
    parse_preset,
    read_frontmatter,
    respell,
    warn_once,
)

WRITABLE_SCOPES = ("project", "global")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_LISTS = ("tools", "excludeTools", "disallowedTools", "skills")  # written as "a, b", the way people write them
_TEXT = ("description", "model", "prompt")  # FIELD=VALUE keeps these as typed (description=yes is not True)


class AssignmentError(PresetError):
    """A ``FIELD=VALUE`` word that is not one (a usage error on the command line)."""


def check_name(name: Any) -> str:
    """A preset name: it is also the file's name and a word on the command line."""
    if not isinstance(name, str) or not _NAME.match(name) or name.endswith(".md"):
        raise PresetError(f"A preset name is 1 to 64 letters, digits, '-', '_' and '.', starting with a letter or "
                          f"digit, without '.md' (e.g. code-reviewer), got {name!r}")
    return name


def presets_dir(scope: str, project: str | Path | None = None) -> Path:
    """Where ``scope``'s presets are written: the project's ``.pi/subagents/`` (the nearest one, else at the project
    root) or the agent dir's ``subagents/``. The folder need not exist yet."""
    if scope == "global":
        return global_presets_dir()
    if scope == "project":
        return find_project_presets_dir(project) or project_root(resolve_cwd(project)) / ".pi" / "subagents"
    raise PresetError(f"scope must be 'project' or 'global' (presets are written in pi's folders), got {scope!r}")


def _scope_flag(scope: str) -> str:
    return "" if scope == "project" else f", scope={scope!r}"


def file_of(name: str, directory: Path) -> Path | None:
    """The file in ``directory`` that is preset ``name`` (by its ``name:``, else its file name), if any."""
    found = [path for path in preset_files(directory) if claimed_name(path) == name] if directory.is_dir() else []
    named = directory / f"{name}.md"
    if len(found) > 1:
        raise PresetError(f"Two files in {directory} claim the preset name '{name}': "
                          f"{' and '.join(str(p) for p in found)}. Rename or delete one.")
    return found[0] if found else (named if named.exists() else None)


def file_fields(fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Keyword fields -> the file's fields (camelCase, lists as "a, b"), and camel -> the caller's spelling."""
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    known = sorted(KNOWN_KEYS | IGNORED_KEYS | set(SNAKE_CASE))
    for key, value in fields.items():
        camel = SNAKE_CASE.get(key, key)
        if camel not in KNOWN_KEYS and camel not in IGNORED_KEYS:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            raise PresetError(f"Unknown preset field '{key}'" + (f"; did you mean '{close[0]}'?" if close else "")
                              + f" Fields: {', '.join(sorted(KNOWN_KEYS - {'name'}))} (or their snake_case "
                              "spellings), and prompt for the body")
        if camel in out:
            raise PresetError(f"'{spelled.get(camel, camel)}' and '{key}' are two spellings of one field; give one")
        if camel != key:
            spelled[camel] = key
        if isinstance(value, tuple):
            value = list(value)
        if camel in _LISTS and isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ", ".join(value)
        out[camel] = value
    return out, spelled


def render(fields: dict[str, Any], prompt: str) -> str:
    """A preset file's text: the fields as YAML frontmatter, then the prompt."""
    head = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, default_flow_style=False, width=10**6)
    body = prompt.strip()
    return f"---\n{head}---\n" + (f"{body}\n" if body else "")


def _commit(text: str, final: Path, scope: str, *, name: str, spelled: dict[str, str] | None = None,
            overwrite: bool = False) -> Preset:
    """Write ``text`` to ``final`` if the parser reads it; else raise its error, naming ``final``, and write nothing."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=final.parent))  # hidden: discovery skips it
    try:
        draft = staging / final.name
        draft.write_text(text, encoding="utf-8")
        try:
            written = parse_preset(draft, scope, warn=False).name
        except PresetError as exc:
            raise PresetError([respell(m.replace(str(draft), str(final)), spelled or {}) + " (nothing was written)"
                               for m in exc.problems]) from None
        if written != name:
            raise PresetError(f"The preset text says name: {written}, but it is being written as '{name}': make them "
                              "the same, or remove the name: line (the file's name is then the preset's); nothing "
                              "was written")
        if not overwrite and final.exists():
            raise PresetError(f"{final} exists; nothing was written")
        os.replace(draft, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    preset = parse_preset(final, scope, warn=False)
    for note in notes(preset):  # what the person writing it should know (tools pi has no meaning for, ...): now
        warn_once(final, f"Preset file {final}: {note}")
    return preset


def _refuse_existing(name: str, scope: str, directory: Path) -> None:
    existing = file_of(name, directory)
    if existing is not None:
        raise PresetError(f"A {scope} preset named '{name}' exists: {existing}. Change it with edit_preset('{name}', "
                          f"field=value, ...) (shell: nbsubagents presets set {name} FIELD=VALUE), or delete it "
                          f"first: delete_preset('{name}'{_scope_flag(scope)}) (shell: nbsubagents presets delete "
                          f"{name}{' --global' if scope == 'global' else ''})")


def new_preset(name: str, *, description: str, model: str | None = None, tools: Any = None, prompt: str = "",
               scope: str = "project", project: str | Path | None = None, **fields: Any) -> Preset:
    """Write a new preset file; refuse one that exists. See ``nbsubagents.new_preset``."""
    check_name(name)
    if not isinstance(description, str) or not description.strip():
        raise PresetError(f"description must be text saying when to pick preset '{name}', got {description!r}")
    if not isinstance(prompt, str):
        raise PresetError(f"prompt must be text (the preset's system prompt), got {type(prompt).__name__}")
    directory = presets_dir(scope, project)
    _refuse_existing(name, scope, directory)
    given = {"description": description, "model": model, "tools": tools, **fields}
    data, spelled = file_fields({key: value for key, value in given.items() if value is not None})
    return _commit(render({"name": name, **data}, prompt), directory / f"{name}.md", scope, name=name,
                   spelled=spelled)


def write_text(name: str, text: str, *, scope: str = "project", project: str | Path | None = None,
               replace: bool = False) -> Preset:
    """A whole preset file (frontmatter and prompt) written as preset ``name``: ``%%subagent_preset``'s cell."""
    check_name(name)
    directory = presets_dir(scope, project)
    existing = file_of(name, directory)
    if existing is not None and not replace:
        raise PresetError(f"A {scope} preset named '{name}' exists: {existing}. Replace it with --replace "
                          f"(replace=True), or change one field with edit_preset / %subagent_preset set")
    return _commit(text if text.endswith("\n") else text + "\n", existing or directory / f"{name}.md", scope,
                   name=name, overwrite=True)


def visible_file(name: str, project: str | Path | None = None) -> tuple[Path, str]:
    """The file and scope of preset ``name`` as a run from ``project`` would pick it (a broken one too)."""
    found = scan(project)
    if name in found.presets:
        return found.presets[name].path, found.presets[name].scope
    if name in found.broken:
        return found.broken[name].path, found.broken[name].scope
    available = ", ".join(found.presets) or "none"
    raise PresetError(f"Unknown preset: '{name}'. Available presets: {available}")


def edit_preset(name: str, *, project: str | Path | None = None, **fields: Any) -> Preset:
    """Change fields of the preset a run would pick; a field set to None is removed, ``prompt=`` replaces the body."""
    return edit_fields(name, fields, project=project)


def edit_fields(name: str, fields: dict[str, Any], *, project: str | Path | None = None) -> Preset:
    """``edit_preset`` with the fields as a dict (``FIELD=VALUE`` words, where ``name=`` can be one)."""
    fields = dict(fields)
    if not fields:
        raise PresetError(f"edit_preset('{name}') needs a field to change, e.g. model='demo/scripted', "
                          "max_tool_calls=10, or tools=None to remove one")
    if "name" in fields:
        raise PresetError(f"A preset is renamed by copying it: copy_preset('{name}', NEW_NAME), then "
                          f"delete_preset('{name}')")
    path, scope = visible_file(name, project)
    if scope not in WRITABLE_SCOPES:
        raise PresetError(f"'{name}' is a Claude Code agent file ({path}); nbsubagents does not change those. Copy it "
                          f"into a pi preset first: copy_preset('{name}', '{name}'), then edit that")
    data, body = read_frontmatter(path)
    prompt = fields.pop("prompt", body)
    changes, spelled = file_fields(fields)
    for camel, value in changes.items():
        present = [key for key in data if key == camel or SNAKE_CASE.get(key) == camel]
        if value is None:
            for key in present:
                del data[key]
        else:
            data[present[0] if present else camel] = value  # the file's own spelling stays
    return _commit(render(data, prompt or ""), path, scope, name=name, spelled=spelled, overwrite=True)


def copy_preset(name: str, new_name: str, *, scope: str = "project", project: str | Path | None = None) -> Preset:
    """Copy any visible preset (a Claude Code agent file too) into a pi preset named ``new_name``."""
    check_name(new_name)
    found = scan(project)
    if name not in found.presets:
        if name in found.broken:
            raise PresetError(found.broken[name].message)
        raise PresetError(f"Unknown preset: '{name}'. Available presets: {', '.join(found.presets) or 'none'}")
    source = found.presets[name]
    directory = presets_dir(scope, project)
    _refuse_existing(new_name, scope, directory)
    data, body = read_frontmatter(source.path)
    data, _ = one_spelling(data, f"Preset file {source.path}")
    data.pop("name", None)
    if source.scope.startswith("claude-"):
        data = _from_claude(data, source, new_name)
    return _commit(render({"name": new_name, **data}, body), directory / f"{new_name}.md", scope, name=new_name)


def _from_claude(data: dict[str, Any], source: Preset, new_name: str) -> dict[str, Any]:
    """A Claude Code agent's fields in pi's terms: tool names mapped (Read -> read, Glob -> find), ``model: inherit``
    dropped, and ``skills`` (Claude skills, not files pi loads) dropped with a warning."""
    for key, names in (("tools", source.tools), ("disallowedTools", source.disallowed_tools)):
        if names is not None:
            data[key] = ", ".join(dict.fromkeys(classify_tool(n)[0] or n for n in names))
    if data.get("model") == "inherit":
        del data["model"]
    if data.pop("skills", None) is not None:
        warnings.warn(f"Copying Claude Code agent '{source.name}' into pi preset '{new_name}': its skills are Claude "
                      "skills, which pi cannot load, so they are not copied", PresetWarning, stacklevel=3)
    return data


def delete_preset(name: str, *, scope: str = "project", project: str | Path | None = None) -> Path:
    """Delete preset ``name``'s file in ``scope``; return its path."""
    directory = presets_dir(scope, project)
    path = file_of(name, directory)
    if path is None:
        here = [claimed_name(p) for p in preset_files(directory)] if directory.is_dir() else []
        hint = ""
        visible = scan(project)
        elsewhere = visible.presets.get(name) or visible.broken.get(name)
        if elsewhere is not None and elsewhere.scope in WRITABLE_SCOPES:
            hint = (f" '{name}' is a {elsewhere.scope} preset ({elsewhere.path}): "
                    f"delete_preset('{name}'{_scope_flag(elsewhere.scope)})"
                    + (" (shell: --global)" if elsewhere.scope == "global" else ""))
        raise PresetError(f"No {scope} preset named '{name}' in {directory} ({scope} presets: "
                          f"{', '.join(sorted(here)) or 'none'}).{hint}")
    path.unlink()
    return path


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """``FIELD=VALUE`` words (the CLI's and the magic's ``set``) -> fields; ``FIELD=`` removes the field (None).

    A value is read as YAML (``2``, ``true``, ``[a, b]``), except description, model and prompt, kept as typed, and
    text YAML cannot read (``*, ext:foo/bar``), kept as typed too."""
    fields: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise AssignmentError(f"'{item}' is not FIELD=VALUE: e.g. maxToolCalls=5, tools=read,grep, or model= "
                              "(empty) to remove the model")
        fields[key.strip()] = _value(key.strip(), text)
    return fields


def _value(key: str, text: str) -> Any:
    if text == "":
        return None
    if key in _TEXT:
        return text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return text if isinstance(value, dict) or value is None else value
