"""The options of a run that talks to the notebook: a preset's ``ask``, ``approval`` and ``fallbackModels`` (and
``fallback_models``), the call's ``ask=``, ``approval=`` and ``fallback_models=``, the meta.json keys and pi's
argv they become, and the ``question_timeout`` setting (0 where nobody can answer)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from pathlib import Path

import pytest

from nbsubagents._lifecycle.edge import edge
from nbsubagents import _config as config
from nbsubagents._config import NbSubagentsError
from nbsubagents._lifecycle.prepare import prepare
from nbsubagents._lifecycle.spec import TaskSpec, as_spec, options
from nbsubagents._child.harnesses.pi import APPROVE_EXTENSION, ASK_EXTENSION
from helpers import pi_argv
from nbsubagents._pi.models import ModelError
from nbsubagents._child.harnesses.pi import write_agent_dir
from nbsubagents._preset_files import PresetError
from nbsubagents._preset_files.parse import parse_preset


def preset_file(folder: Path, frontmatter: str, name: str = "talker") -> Path:
    path = folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: talks\n{frontmatter}---\nBody.\n", encoding="utf-8")
    return path


def parse(tmp_path: Path, frontmatter: str, scope: str = "project"):
    return parse_preset(preset_file(tmp_path / ".pi" / "subagents", frontmatter), scope)


# -- preset fields ---------------------------------------------------------------------------------------------
def test_a_preset_asks_needs_approval_and_names_fallback_models(tmp_path):
    preset = parse(tmp_path, "ask: true\napproval:\n  tools: [bash, edit]\n  allow: ['git status*', 'ls *']\n"
                             "  inside: [src]\n  otherwise: allow\nfallbackModels: [demo/backup, openai/gpt-4.1]\n")
    assert preset.ask is True
    assert preset.approval == {"tools": ["bash", "edit"], "allow": ["git status*", "ls *"], "inside": ["src"],
                               "otherwise": "allow"}
    assert preset.fallback_models == ("demo/backup", "openai/gpt-4.1")
    assert not preset.notes  # known keys: no "unknown key" warning


def test_the_snake_case_spelling_and_the_list_shorthands(tmp_path):
    preset = parse(tmp_path, "fallback_models: demo/backup, demo/other\napproval: [Bash, Write]\n")
    assert preset.fallback_models == ("demo/backup", "demo/other")
    assert preset.approval == {"tools": ["bash", "write"], "allow": [], "inside": [], "otherwise": "deny"}
    assert preset.ask is False


def test_a_claude_code_agent_file_names_tools_its_way(tmp_path):
    """A Claude Code agent (``tools: Read, Grep, Glob, Bash``, ``model: sonnet``): approval names tools the same
    way (a comma-separated string, Claude's names); they are stored as pi's."""
    path = preset_file(tmp_path / ".claude" / "agents", "tools: Read, Grep, Glob, Bash\nmodel: sonnet\ncolor: "
                       "purple\napproval: Bash, MultiEdit, Write\nfallbackModels: [haiku]\n", "code-reviewer")
    preset = parse_preset(path, "claude-project")
    assert preset.approval["tools"] == ["bash", "edit", "write"]
    assert preset.fallback_models == ("haiku",)


def test_every_tool_is_star_or_all(tmp_path):
    assert parse(tmp_path, "approval: '*'\n").approval["tools"] == ["*"]
    assert parse(tmp_path, "approval: [all, ext:deploy/ship]\n").approval["tools"] == ["*", "ship"]


@pytest.mark.parametrize("frontmatter, words", [
    ("ask: maybe\n", ["'ask' must be true or false", "'maybe'"]),
    ("approval: true\n", ["'approval' must be a list of tools such as [bash, edit]", "got True"]),
    ("approval: {tools: [bash], when: later}\n", ["unknown key(s) when", "tools, allow, inside, otherwise"]),
    ("approval: [WebFetch]\n", ["'WebFetch'", "no pi equivalent", "read, bash, edit"]),
    ("approval: ['Bash(git diff:*)']\n", ["argument-restricted", "allow: ['git diff*']"]),
    ("approval: []\n", ["names no tool", "e.g. [bash, edit]"]),
    ("approval: {tools: [read], allow: ['ls *']}\n", ["allow lists bash commands", "do not name bash"]),
    ("approval: {tools: [bash], inside: [src]}\n", ["inside lists folders", "neither edit nor write"]),
    ("approval: {tools: [bash], otherwise: maybe}\n", ["otherwise must be deny or allow", "'maybe'"]),
    ("approval: {tools: [bash], allow: [3]}\n", ["allow must be fnmatch patterns", "[3]"]),
    ("fallbackModels: 3\n", ["'fallbackModels' must be a list of models such as", "got 3"]),
    ("fallback_models: [demo/a, '']\n", ["'fallback_models' must be a list of models", "''"]),
    ("fallback_models: [a]\nfallbackModels: [b]\n", ["'fallback_models' and 'fallbackModels' are two spellings"]),
])
def test_a_bad_value_names_the_field_the_value_and_what_is_right(tmp_path, frontmatter, words):
    with pytest.raises(PresetError) as caught:
        parse(tmp_path, frontmatter)
    message = str(caught.value)
    assert "talker.md" in message
    for word in words:
        assert word in message, message


# -- call options ----------------------------------------------------------------------------------------------
def test_the_call_options_are_in_the_one_task_schema():
    names = {o.name: o for o in options("call")}
    assert {"ask", "approval", "fallback_models"} <= set(names)
    assert names["fallback_models"].spelling == "--fallback-model" and names["fallback_models"].repeat
    assert names["ask"].parse("yes") is True and names["ask"].parse("no") is False
    assert {"ask", "approval", "fallback_models"} <= {o.name for o in options("magic")}
    assert {"ask", "approval", "fallback_models"} <= {o.name for o in options("sweep")}


@pytest.mark.parametrize("item, words", [
    ({"ask": "yes"}, ["Task 0: 'ask' must be True or False", "'yes'"]),
    ({"approval": {"tools": ["bash"], "otherwise": "ask"}}, ["Task 0: 'approval'.otherwise must be deny or allow"]),
    ({"approval": ["Fetch"]}, ["'Fetch'", "no pi equivalent"]),
    ({"fallback_models": "demo/a,"}, ["Task 0: 'fallback_models' must be a list of models", "'demo/a,'"]),
])
def test_a_task_with_a_bad_value_is_refused_before_anything_runs(item, words):
    with pytest.raises(NbSubagentsError) as caught:
        as_spec({"preset": "scout", "task": "ls", **item}, 0)
    for word in words:
        assert word in str(caught.value), str(caught.value)


# -- meta.json and argv ----------------------------------------------------------------------------------------
@pytest.fixture
def talker(project, scripted):
    """The test project with a preset that asks, needs approval and falls back; the scripted provider offers
    demo/scripted and demo/backup."""
    write_agent_dir(os.environ["PI_CODING_AGENT_DIR"], scripted.url, models=("scripted", "backup"))
    preset_file(project / ".pi" / "subagents", "model: demo/scripted\ntools: read, bash\nask: true\n"
                "approval: {tools: [Bash], allow: ['ls *']}\nfallbackModels: [backup]\n")
    return project


def prepared(**options) -> dict:
    run = prepare(TaskSpec(preset="talker", task="ls", **options), mode="background", note=False)
    return json.loads(run.paths.meta.read_text())


def test_the_preset_becomes_meta_keys_env_and_argv(talker):
    meta = prepared()
    policy = {"tools": ["bash"], "allow": ["ls *"], "inside": [], "otherwise": "deny"}
    assert meta["ask"] is True
    assert meta["approval"] == policy
    assert meta["fallbackModels"] == ["demo/backup"]  # resolved the way model is
    assert json.loads(meta["env"]["NBSUBAGENTS_APPROVAL"]) == policy
    argv = meta["argv"]
    assert argv[argv.index("--tools") + 1] == "read,bash,ask"  # --tools is an allowlist of extension tools too
    extensions = [argv[i + 1] for i, word in enumerate(argv) if word == "--extension"]
    assert extensions == [str(ASK_EXTENSION), str(APPROVE_EXTENSION)]
    assert all(Path(path).is_file() for path in extensions)


def test_the_call_overrides_the_preset(talker):
    meta = prepared(ask=False, approval=False, fallback_models=["demo/scripted"])
    assert (meta["ask"], meta["approval"], meta["fallbackModels"]) == (False, None, ["demo/scripted"])
    assert "NBSUBAGENTS_APPROVAL" not in meta["env"]
    assert "--extension" not in meta["argv"] and "ask" not in meta["argv"][meta["argv"].index("--tools") + 1]
    meta = prepared(approval=["write"], fallback_models=[])
    assert meta["approval"] == {"tools": ["write"], "allow": [], "inside": [], "otherwise": "deny"}
    assert meta["fallbackModels"] == []


def test_a_run_without_the_options_has_them_off(project):
    run = prepare(TaskSpec(preset="scout", task="ls"), mode="background", note=False)
    assert (run.record.ask, run.record.approval, run.record.fallback_models) == (False, None, [])
    assert "--extension" not in run.record.argv and "NBSUBAGENTS_APPROVAL" not in run.record.env


def test_an_unknown_fallback_model_is_an_error_before_the_run_is_written(talker):
    runs = talker / ".pi" / "subagents" / "runs"
    before = sorted(runs.iterdir()) if runs.exists() else []
    with pytest.raises(ModelError) as caught:
        prepared(fallback_models=["demo/nosuch"])
    assert 'Unknown model "demo/nosuch" (from the call\'s fallback_models)' in str(caught.value)
    assert "demo/backup" in str(caught.value)  # what is available
    assert (sorted(runs.iterdir()) if runs.exists() else []) == before
    with pytest.raises(ModelError, match="has a :high suffix"):
        prepared(fallback_models=["demo/backup:high"])


def test_a_bad_call_value_is_refused_by_prepare(talker):
    with pytest.raises(NbSubagentsError, match=r"The call's approval must be a list of tools .* got 3"):
        prepared(approval=3)
    with pytest.raises(NbSubagentsError, match="The call's ask must be True or False, got 'yes'"):
        prepared(ask="yes")


def test_offline_runs_have_no_fallbacks(talker):
    config.configure(offline=True)
    assert prepared()["fallbackModels"] == []  # every offline run uses the scripted model


def test_no_tools_with_ask_leaves_the_child_only_its_question():
    bare = SimpleNamespace(prompt=None, tools=None, disallowed_tools=None, exclude_tools=None, no_tools=False,
                           permission_mode=None, thinking=None, skills=(), no_skills=False, no_context_files=False,
                           no_extensions=False, extension_files=(), extra_args=(), path=Path("bare.md"),
                           scope="project", extra={})
    argv, _ = pi_argv(SimpleNamespace(**{**vars(bare), "no_tools": True}), ask=True)
    assert argv[-4:] == ["--tools", "ask", "--extension", str(ASK_EXTENSION)]
    assert pi_argv(bare, approval=True)[0][-2:] == ["--extension", str(APPROVE_EXTENSION)]
    assert "--tools" not in pi_argv(bare, ask=True)[0]  # every tool already: ask among them
    argv = pi_argv(SimpleNamespace(**{**vars(bare), "all_tools": True}), ask=True)[0]  # a Claude file: pi's seven
    assert argv[argv.index("--tools") + 1] == "read,bash,edit,write,grep,find,ls,ask"
    argv, _ = pi_argv(SimpleNamespace(**{**vars(bare), "tools": ("read", "ext:x/ask")}), ask=True)
    assert argv[argv.index("--tools") + 1] == "read,ask"


# -- the question_timeout setting ------------------------------------------------------------------------------
def test_a_script_never_waits_for_an_answer_unless_told_to(talker, monkeypatch):
    assert prepared()["questionTimeout"] == 0  # this process is a script: nobody to answer
    monkeypatch.setattr(edge, "person_at_frontend", lambda: True)
    assert prepared()["questionTimeout"] == 300  # a notebook's cell: the default
    config.configure(question_timeout=0)
    assert prepared()["questionTimeout"] == 0  # an explicit setting wins, either way
    monkeypatch.setattr(edge, "person_at_frontend", lambda: False)
    config.configure(question_timeout=45)
    assert prepared()["questionTimeout"] == 45


def test_the_setting_comes_from_a_settings_file_too(talker):
    (talker / ".pi" / "settings.json").write_text(json.dumps({"subagents": {"questionTimeout": 120}}))
    assert prepared()["questionTimeout"] == 120


def test_a_negative_question_timeout_is_refused():
    with pytest.raises(NbSubagentsError, match=r"configure\(question_timeout=...\) must be a number of seconds "
                                               r">= 0, got -1"):
        config.configure(question_timeout=-1)


@pytest.mark.notebook
def test_a_kernel_cell_run_with_stdin_has_a_person_a_batch_run_has_none(tmp_path):
    """JupyterLab and VS Code run cells with allow_stdin; nbclient, papermill and nbconvert without."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        code = "from nbsubagents._ui.kernel import person_at_frontend\nprint(person_at_frontend())"

        def printed(allow_stdin: bool) -> str:
            reply = kc.execute_interactive(code, allow_stdin=allow_stdin, timeout=60,
                                           output_hook=lambda msg: out.append(msg), stdin_hook=lambda msg: None)
            assert reply["content"]["status"] == "ok", reply
            return "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream").strip()

        out: list[dict] = []
        assert printed(True) == "True"
        out.clear()
        assert printed(False) == "False"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
