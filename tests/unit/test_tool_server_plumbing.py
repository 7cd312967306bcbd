"""How a run's tool servers reach each harness (Request.tool_servers), and the python_session option that asks for
the Python session: pi's bridge extension, Claude Code's --mcp-config, Codex's mcp_servers; the MCP tools named by
their own name; the scripted model's python: line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from nbsubagents import _config as config
from nbsubagents._child.harnesses import Request, claude_code, codex, pi
from nbsubagents._child.tool_servers import ToolServer, writes_of
from nbsubagents._config import NbSubagentsError
from nbsubagents._lifecycle import prepare
from nbsubagents._lifecycle.spec import TaskSpec, resolve
from nbsubagents._pi import scripted_anthropic, scripted_responses
from nbsubagents._pi.scripted import demo_plan
from nbsubagents._preset_files.parse import parse_preset

SERVER = ToolServer("python", ("/usr/bin/python3", "-c", "code", "/runs/r1"), {"MPLBACKEND": "Agg"},
                    tools=("python",), writes={"python": "folder"})


def request(tmp_path: Path, program: str, **given) -> Request:
    return Request(program=program, cwd=str(tmp_path), run_dir=str(tmp_path / "run"), tool_servers=(SERVER,), **given)


def test_pi_loads_the_bridge_with_the_servers_in_its_environment_and_allows_their_tools(tmp_path):
    argv, env = pi.build(request(tmp_path, "pi", model="demo/scripted", tools=("read", "bash")))
    assert argv[argv.index(str(pi.BRIDGE_EXTENSION)) - 1] == "--extension"
    assert json.loads(env["NBSUBAGENTS_TOOL_SERVERS"]) == [SERVER.as_json()]
    assert argv[argv.index("--tools") + 1] == "read,bash,python"
    argv, _ = pi.build(request(tmp_path, "pi", model="demo/scripted", no_tools=True))
    assert argv[argv.index("--tools") + 1] == "python" and "--no-tools" not in argv  # asked for: it has the tool
    argv, env = pi.build(Request(program="pi", cwd=str(tmp_path), run_dir=str(tmp_path / "run")))
    assert str(pi.BRIDGE_EXTENSION) not in argv and "NBSUBAGENTS_TOOL_SERVERS" not in env


@pytest.mark.parametrize("tools", [None, ("read",)])
def test_claude_code_gets_the_servers_as_its_mcp_config_and_may_use_their_tools(tmp_path, tools):
    argv, _ = claude_code.build(request(tmp_path, "/bin/claude", tools=tools))
    config_json = json.loads(argv[argv.index("--mcp-config") + 1])
    assert config_json == {"mcpServers": {"python": {"type": "stdio", "command": "/usr/bin/python3",
                                                     "args": ["-c", "code", "/runs/r1"], "env": {"MPLBACKEND": "Agg"}}}}
    assert argv[argv.index("--mcp-config") + 2:argv.index("--mcp-config") + 4] == ["--allowedTools", "mcp__python"]
    assert "--strict-mcp-config" in argv  # only these servers: none of the machine's or the project's


def test_codex_gets_the_servers_as_its_mcp_servers_config(tmp_path):
    argv, _ = codex.build(request(tmp_path, "/bin/codex"))
    settings = {}
    for flag, value in zip(argv, argv[1:]):
        if flag == "-c" and value.startswith("mcp_servers."):
            key, _, toml = value.partition("=")
            settings[key] = tomllib.loads(f"v = {toml}")["v"]
    assert settings == {"mcp_servers.python.command": "/usr/bin/python3",
                        "mcp_servers.python.args": ["-c", "code", "/runs/r1"],
                        "mcp_servers.python.env": {"MPLBACKEND": "Agg"}, "mcp_servers.python.startup_timeout_sec": 60}
    assert argv[-1] == "-"  # the task still comes on stdin


def test_mcp_tools_are_named_by_their_own_name_in_the_events():
    adapter = claude_code.Adapter()
    events = adapter.adapt({"type": "assistant", "message": {"id": "m1", "content": [
        {"type": "tool_use", "id": "t1", "name": "mcp__python__python", "input": {"code": "1"}}]}})
    assert [e for e in events if e["type"] == "tool_call"][0]["name"] == "python"
    result = adapter.adapt({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "Out[1]: 1"}]}]}})
    assert result[0]["name"] == "python" and result[0]["text"] == "Out[1]: 1"


def test_the_scripted_model_calls_the_python_tool_in_each_dialect():
    step = demo_plan("python: x = 41\\nx + 1")[0]
    assert step["tool_calls"] == [{"name": "python", "arguments": {"code": "x = 41\nx + 1"}}]
    offered = ["Bash", "mcp__python__python"]
    assert scripted_anthropic.claude_call("python", {"code": "1"}, "/w", offered) == ("mcp__python__python", {"code": "1"})
    kind, name, args = scripted_responses.codex_call("python", {"code": "1"}, {"mcp__python__python": "function"}, None)
    assert (kind, name, json.loads(args)) == ("function_call", "mcp__python__python", {"code": "1"})


def test_python_session_is_a_run_option_a_preset_may_give(tmp_path):
    path = tmp_path / "analyst.md"
    path.write_text("---\nname: analyst\ndescription: d\npythonSession: true\n---\nbody\n")
    preset = parse_preset(path, "project")
    assert preset.python_session is True
    settings = config.current(tmp_path)
    assert resolve(TaskSpec("analyst", "t"), preset, settings)["python_session"] == (True, 'preset "analyst"')
    assert resolve(TaskSpec("analyst", "t", python_session=False), preset, settings)["python_session"] == (
        False, "call")
    snake = tmp_path / "snake.md"
    snake.write_text("---\nname: snake\ndescription: d\npython_session: true\n---\nbody\n")
    assert parse_preset(snake, "project").python_session is True


def test_the_option_chosen_gives_the_run_the_python_session_s_server(tmp_path):
    paths = prepare.RunPaths(tmp_path / "20260101-000000-abcdef")
    (server,) = prepare.tool_servers({"python_session": (True, "call")}, paths)
    assert server.name == "python" and server.argv[-1] == str(paths.dir)
    assert server.env["PI_SUBAGENTS_RUN_ID"] == paths.dir.name
    assert prepare.tool_servers({"python_session": (None, "default")}, paths) == ()
    with pytest.raises(NbSubagentsError, match="python_session must be True or False, got 'yes'"):
        prepare.tool_servers({"python_session": ("yes", "call")}, paths)
    assert writes_of([server.as_json(), {"name": 3}]) == {"python": "folder"}  # what the sandbox leaves writable
