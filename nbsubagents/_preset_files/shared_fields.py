"""The fields a preset file and a call both take: ``approval`` and ``fallbackModels`` (``fallback_models=``), each
checked by one function for either, so a preset and ``run(approval=...)`` accept and refuse the same values; and the
tool-list splitting (``Read, Agent(a, b)``) that an approval's tools share with a preset's ``tools``.

``error`` is the exception to raise: ``PresetError`` for a preset file, ``NbSubagentsError`` for a call.
"""

from __future__ import annotations

from typing import Any

from .._child.harnesses.pi import PI_TOOLS, classify_tool
from .._config import NbSubagentsError


def split_tool_list(text: str) -> list[str]:
    """Split ``Read, Agent(a, b), Bash(git diff:*)`` on the commas outside parentheses."""
    items, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return items


APPROVAL_KEYS = ("tools", "allow", "inside", "otherwise")
_APPROVAL_EXAMPLE = ("a list of tools such as [bash, edit], or a mapping such as {tools: [bash, edit], "
                     "allow: ['git status*'], inside: [src], otherwise: deny}")


def approval_policy(value: Any, where: str, error: type[NbSubagentsError] = NbSubagentsError) -> dict[str, Any] | None:
    """An approval as a preset or a call gives it -> meta.json's ``approval`` (None: no approval; ``false`` too).

    A list of tool names (or a comma-separated string) is ``{tools: [...]}``; a mapping has ``tools`` and optionally
    ``allow`` (fnmatch patterns of bash commands that need no approval), ``inside`` (folders, relative to the run's
    cwd, whose edits and writes need none) and ``otherwise`` ("deny", the default, or "allow": the decision when
    nobody answers). Tool names are taken as authors write them (``Bash``, ``MultiEdit``, ``*``) and stored as pi's.
    ``where`` names the value in errors ("Preset file x.md: 'approval'")."""
    if value is None or value is False:
        return None
    if isinstance(value, (str, list, tuple)):
        value = {"tools": value}
    if not isinstance(value, dict):
        raise error(f"{where} must be {_APPROVAL_EXAMPLE}; got {value!r}")
    unknown = [str(key) for key in value if key not in APPROVAL_KEYS]
    if unknown:
        raise error(f"{where} has unknown key(s) {', '.join(unknown)}; its keys are {', '.join(APPROVAL_KEYS)}")
    tools = _approval_tools(value.get("tools"), where, error)
    allow = _texts(value.get("allow"), f"{where}.allow", "fnmatch patterns of bash commands such as ['git status*']",
                   error)
    inside = _texts(value.get("inside"), f"{where}.inside", "folders relative to the run's cwd such as [src, docs]",
                    error)
    otherwise = value.get("otherwise", "deny")
    if otherwise not in ("deny", "allow"):
        raise error(f"{where}.otherwise must be deny or allow (what is decided when nobody answers), got "
                    f"{otherwise!r}")
    if allow and not {"bash", "*"} & set(tools):
        raise error(f"{where}.allow lists bash commands, but its tools ({', '.join(tools)}) do not name bash: "
                    "add bash to tools or remove allow")
    if inside and not {"edit", "write", "*"} & set(tools):
        raise error(f"{where}.inside lists folders for edits and writes, but its tools ({', '.join(tools)}) name "
                    "neither edit nor write: add them to tools or remove inside")
    return {"tools": tools, "allow": allow, "inside": inside, "otherwise": otherwise}


def _approval_tools(value: Any, where: str, error: type[NbSubagentsError]) -> list[str]:
    if isinstance(value, str):
        value = split_tool_list(value)
    if not isinstance(value, (list, tuple)) or not all(isinstance(name, str) for name in value):
        raise error(f"{where}: tools must be a list of tool names such as [bash, edit], got {value!r}")
    tools: list[str] = []
    for written in (name.strip() for name in value if name.strip()):
        pi_name, why = classify_tool(written)
        if pi_name is None:
            raise error(f"{where} names {written!r}, which a pi child has no tool for ({why}); name pi's tools "
                        f"({', '.join(PI_TOOLS)}), Claude Code's names of them (Bash, Edit, ...), an extension's "
                        "tool as ext:NAME/TOOL, or * for every tool. Bash commands that need no approval go in "
                        "allow: ['git diff*']")
        if pi_name not in tools:
            tools.append(pi_name)
    if not tools:
        raise error(f"{where} names no tool; name the tools whose calls need approval, e.g. [bash, edit] (or leave "
                    "approval out)")
    return tools


def _texts(value: Any, where: str, right: str, error: type[NbSubagentsError]) -> list[str]:
    """A list of non-empty strings (one string is a list of one); None is []."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(item, str) and item.strip() for item in items):
        raise error(f"{where} must be {right}, got {value!r}")
    return [item.strip() for item in items]


def model_list(value: Any, where: str, error: type[NbSubagentsError] = NbSubagentsError) -> tuple[str, ...] | None:
    """Fallback models as a preset or a call gives them (a list, or a comma-separated string) -> a tuple of the
    names as written (resolved when a run is prepared); None when not given."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(item, str) and item.strip() for item in items):
        raise error(f"{where} must be a list of models such as [anthropic/claude-sonnet-4-5, openai/gpt-4.1], "
                    f"got {value!r}")
    return tuple(item.strip() for item in items)


def delegate_presets(value: Any, where: str, error: type[NbSubagentsError] = NbSubagentsError
                     ) -> tuple[str, ...] | bool | None:
    """``delegate``: the presets a run may start sub-agents from (issue 58): a list of preset names, ``True`` for
    every preset of the project, ``False`` (or nothing) for none. None when unset or ``False``."""
    if value is None or value is False:
        return None
    if value is True:
        return True
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v.strip() for v in value):
        return tuple(dict.fromkeys(v.strip() for v in value))
    raise error(f"{where} must be a list of preset names (such as [scout, reviewer]), true for every preset, or "
                f"false, got {value!r}")
