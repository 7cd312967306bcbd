"""Presets made from code run: one made by new_preset, a budget in either spelling stopping the run at it, the
tintinweb-style agent file with its extension tool, and a Claude Code agent copied into a pi preset. Real pi, the
scripted model; what the child was offered is read from the model's recorded requests."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import nbsubagents

TINTINWEB = Path(__file__).resolve().parents[1] / "fixtures" / "agent-corpus" / "tintinweb"


def offered_tools(request: dict) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or ()}


def system_prompt(request: dict) -> str:
    return "".join(m["content"] if isinstance(m["content"], str) else "" for m in request["messages"]
                   if m.get("role") in ("system", "developer"))


def test_a_preset_made_by_new_preset_runs_with_its_prompt_and_tools(project, scripted):
    nbsubagents.new_preset("lister", description="Lists folders", model="demo/scripted", tools=["ls"],
                           prompt="You list folders. MARKER-NEW-PRESET")
    run = nbsubagents.run("lister", "ls src", show=False)
    assert run.status == "completed", run.error
    assert "app.py" in run.output
    first = scripted.requests[0]
    assert "MARKER-NEW-PRESET" in system_prompt(first) and offered_tools(first) == {"ls"}


def endless(body, index):
    return {"text": f"step {index}", "tool_calls": [{"name": "bash", "arguments": {"command": f"echo step-{index}"}}],
            "delay": 0.1}


@pytest.mark.serial
@pytest.mark.parametrize("spelling", ["max_tool_calls", "maxToolCalls"])
def test_a_budget_in_either_spelling_stops_the_run_at_it(project, scripted, spelling):
    nbsubagents.new_preset("capped", description="c", model="demo/scripted", tools="bash")
    path = project / ".pi" / "subagents" / "capped.md"
    path.write_text(path.read_text().replace("tools: bash\n", f"tools: bash\n{spelling}: 2\n"))
    scripted.script = endless
    run = nbsubagents.run("capped", "go", show=False, timeout=120)
    assert run.result["stopReason"] == "budget:tool_calls", run.result
    assert run.result["toolCalls"] == 3  # two ran; the third was stopped as it started
    assert "Stopped at 2 tool calls (max_tool_calls=2)" in run.error


def alpha_then_answer(body, index):
    if index == 0:
        return {"text": "asking alpha", "tool_calls": [{"name": "alpha_read", "arguments": {}}]}
    return {"text": "alpha answered"}


def test_the_tintinweb_agent_file_runs_with_its_extension_tool(project, scripted):
    shutil.copytree(TINTINWEB, project, dirs_exist_ok=True)
    scripted.script = alpha_then_answer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the ext: note is checked in tests/unit/test_preset_write.py
        run = nbsubagents.run("alpha-reader", "use alpha", model="demo/scripted", show=False)
    assert run.status == "completed", run.error
    offered = offered_tools(scripted.requests[0])
    assert "alpha_read" in offered and "alpha_write" not in offered and "bash" not in offered and "read" in offered
    results = [e for e in run.events() if e["type"] == "tool_result"]
    assert [(e["name"], e["isError"], e["text"]) for e in results] == [("alpha_read", False, "alpha_read says hello")]


def test_a_claude_code_agent_copied_into_a_pi_preset_runs(project, scripted):
    folder = project / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "code-reader.md").write_text("---\nname: code-reader\ndescription: Use this agent to read code\n"
                                           "tools: Read, Glob\nmodel: inherit\n---\nYou read code. MARKER-CLAUDE\n")
    copy = nbsubagents.copy_preset("code-reader", "reader")
    nbsubagents.edit_preset("reader", model="demo/scripted")
    assert copy.scope == "project" and nbsubagents.presets().problems == []
    run = nbsubagents.run("reader", "read README.md", show=False)
    assert run.status == "completed", run.error
    assert "Demo project" in run.output
    first = scripted.requests[0]
    assert offered_tools(first) == {"read", "find"} and "MARKER-CLAUDE" in system_prompt(first)
