"""Settings that never drop a word: every key of a settings file's ``subagents`` section is a setting or refused
with a did-you-mean, every setting works from the files (``pi`` too), and ``sources()`` says where each came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nbsubagents
from nbsubagents import NbSubagentsError, _config as config
from nbsubagents._pi.locate import PiNotFoundError, find_pi

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder (the current folder) and an agent dir of its own; no setting from the environment."""
    root = tmp_path / "project"
    (root / ".pi").mkdir(parents=True)
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    for name in ("NBSUBAGENTS_ROOT", "NBSUBAGENTS_PI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    config.reset()
    yield root
    config.reset()


def write(path: Path, section: object) -> Path:
    path.write_text(json.dumps({"theme": "dark", "subagents": section}))  # pi's own keys sit beside ours
    return path


def refusal(project: Path, section: dict) -> str:
    write(project / ".pi" / "settings.json", section)
    with pytest.raises(NbSubagentsError) as err:
        config.current()
    return str(err.value)


@pytest.mark.parametrize("key, meant", [
    ("timout", "timeout"), ("isolaton", "isolation"), ("loopingToolCont", "loopingToolCount"),
    ("max_tokns", "max_tokens"), ("secretPattern", "secretPatterns"), ("ofline", "offline"),
])
def test_an_unknown_key_is_refused_naming_the_file_the_key_and_what_was_meant(project, key, meant):
    message = refusal(project, {key: 1})
    assert str(project / ".pi" / "settings.json") in message
    assert f'"subagents.{key}" is not a setting (did you mean "{meant}"?)' in message
    assert '"//" is a comment' in message


def test_a_misspelt_isolation_stops_the_run_before_anything_is_written(project):
    write(project / ".pi" / "settings.json", {"isolaton": "worktree"})
    with pytest.raises(NbSubagentsError, match='did you mean "isolation"'):
        nbsubagents.run("scout", "write x.txt: changed", show=False)
    assert not (project / ".pi" / "subagents").exists()


def test_the_agent_dirs_settings_file_is_checked_the_same_way(project):
    write(config.agent_dir() / "settings.json", {"concurency": 2})
    with pytest.raises(NbSubagentsError, match=r'agent/settings.json: "subagents.concurency" is not a setting '
                                               r'\(did you mean "concurrency"\?\)'):
        config.current()


def test_keys_starting_with_two_slashes_are_comments(project):
    write(project / ".pi" / "settings.json", {"// why": "the model is slow here", "//": ["notes"], "timeout": 5,
                                             "//timeout": "not a setting either"})
    assert config.current().timeout == 5


def test_a_setting_given_in_both_spellings_is_refused(project):
    message = refusal(project, {"maxTurns": 3, "max_turns": 4})
    assert '"subagents.max_turns" is "maxTurns" again: give it once' in message


# One right value of each setting a file may hold (not its default): a new setting needs one here.
EXAMPLES = {
    "pi": "/opt/pi/bin/pi", "concurrency": 2, "max_tasks": 3, "timeout": 5.5, "extend_timeout_debounce": 7,
    "looping_tool_count": 0, "panel_lines": 9, "runner": "tmux", "poll_interval": 0.5, "claude_agents": False,
    "isolation": "worktree", "isolation_max_copy_mb": 12.5, "input_max_mb": 3.5, "inputs_max_mb": 20, "max_turns": 4, "max_tool_calls": 5, "max_tokens": 600,
    "max_cost": 0.25, "executor": "dask", "dask_scheduler": "tcp://head:8786", "secret_patterns": ("corp-[0-9]+",),
    "offline": True, "question_timeout": 60,
}


@pytest.mark.parametrize("spelling", [config.file_key, lambda name: name], ids=["camelCase", "snake_case"])
def test_every_setting_a_file_may_hold_works_from_the_file_in_either_spelling(project, spelling):
    allowed = [name for name, spec in config.SPECS.items() if spec.not_in_file is None]
    assert sorted(allowed) == sorted(EXAMPLES)
    write(project / ".pi" / "settings.json", {spelling(name): EXAMPLES[name] for name in allowed})
    now = config.current()
    for name in allowed:
        assert getattr(now, name) == EXAMPLES[name], name


@pytest.mark.parametrize("key, value, right", [
    ("runner", "docker", '"process" or "tmux"'),
    ("offline", "yes", "true or false"),
    ("pi", 5, "a path such as"),
    ("pi", "", "a path such as"),
    ("executor", "cloud", '"local" or "dask"'),
    ("daskScheduler", " ", "a scheduler address such as"),
    ("maxTurns", 0, "a whole number of at least 1"),
    ("maxCost", True, "a positive amount"),
    ("isolation", "copy", '"worktree" or "none"'),
    ("secretPatterns", 42, "a list of regular expressions"),
    ("pollInterval", 0, "a number of seconds > 0 and at most 10"),
])
def test_each_value_is_type_checked_naming_the_file_and_key(project, key, value, right):
    message = refusal(project, {key: value})
    assert f'Settings file {project / ".pi" / "settings.json"}: "subagents.{key}" must be {right}' in message
    assert message.endswith(f"got {value!r}")


@pytest.mark.parametrize("where", ["project", "agent"])
def test_root_cannot_come_from_a_settings_file_and_the_error_says_why_and_what_instead(project, where):
    folder = project / ".pi" if where == "project" else config.agent_dir()
    write(folder / "settings.json", {"root": "/elsewhere"})
    with pytest.raises(NbSubagentsError) as err:
        config.current()
    assert f'{folder / "settings.json"}: "subagents.root" cannot be set in a settings file' in str(err.value)
    assert "configure(root=...) or the NBSUBAGENTS_ROOT variable" in str(err.value)


def test_null_means_no_value_for_a_setting_without_a_default(project):
    write(config.agent_dir() / "settings.json", {"maxTurns": 5, "isolation": "worktree"})
    write(project / ".pi" / "settings.json", {"maxTurns": None})
    assert (config.current().max_turns, config.current().isolation) == (None, "worktree")
    assert "must be a whole number from 1 to 64, got None" in refusal(project, {"concurrency": None})


def test_the_pi_of_a_settings_file_is_the_pi_find_pi_uses(project, monkeypatch):
    """Issue 23: ``{"subagents": {"pi": "/nonexistent/pi"}}`` was ignored."""
    settings = write(project / ".pi" / "settings.json", {"pi": "/nonexistent/pi"})
    with pytest.raises(PiNotFoundError) as err:
        find_pi()
    assert f'pi not found at /nonexistent/pi (from "pi" in the settings file {settings})' in str(err.value)
    (project / "tools").mkdir()
    (project / "tools" / "pi").write_text("#!/bin/sh\n")
    write(project / ".pi" / "settings.json", {"pi": "tools/pi"})  # relative: from the project folder
    (project / "src").mkdir()
    assert find_pi(project / "src") == str(project / "tools" / "pi")
    monkeypatch.chdir(project / "src")
    assert find_pi() == str(project / "tools" / "pi")
    monkeypatch.setenv("NBSUBAGENTS_PI", "/from/the/environment/pi")  # the environment over the files
    with pytest.raises(PiNotFoundError, match=r"/from/the/environment/pi \(from NBSUBAGENTS_PI\)"):
        find_pi()
    config.configure(pi=str(project / "tools" / "pi"))  # configure() over both
    assert find_pi() == str(project / "tools" / "pi")


def test_sources_say_where_each_value_in_force_came_from(project, monkeypatch):
    agent_file = write(config.agent_dir() / "settings.json", {"timeout": 99, "concurrency": 3})
    project_file = write(project / ".pi" / "settings.json", {"concurrency": 2, "// note": "x"})
    monkeypatch.setenv("NBSUBAGENTS_PI", "/usr/bin/env")
    config.configure(panel_lines=7, timeout=None)
    found = config.sources()
    assert set(found) == set(config.SPECS)
    assert found["timeout"] == (99, str(agent_file))
    assert found["concurrency"] == (2, str(project_file))
    assert found["pi"] == ("/usr/bin/env", "NBSUBAGENTS_PI")
    assert found["panel_lines"] == (7, "configure()")
    assert found["max_tasks"] == (16, "default")
    other = project.parent / "other"
    (other / ".pi").mkdir(parents=True)
    monkeypatch.setenv("NBSUBAGENTS_ROOT", str(other))
    found = config.sources()
    assert found["root"] == (str(other), "NBSUBAGENTS_ROOT")
    assert found["concurrency"] == (3, str(agent_file))  # the project's file is the root's now
    in_force = config.current()
    assert {name: value for name, (value, _source) in found.items()} == {n: getattr(in_force, n) for n in found}


def test_configure_refuses_an_unknown_setting_with_a_did_you_mean_and_changes_nothing(project):
    with pytest.raises(NbSubagentsError, match=r"Unknown setting 'timout' \(did you mean \"timeout\"\?\)"):
        config.configure(concurrency=2, timout=5)
    assert config.current().concurrency == 4
    with pytest.raises(NbSubagentsError, match=r'configure\(runner=\.\.\.\) must be "process" or "tmux", got'):
        config.configure(runner="docker")


def test_the_settings_page_names_every_setting_in_both_spellings():
    page = (REPO / "docs" / "user" / "settings.md").read_text()
    for name, spec in config.SPECS.items():
        assert f"`{name}`" in page, name
        if spec.not_in_file is None and config.file_key(name) != name:
            assert f"`{config.file_key(name)}`" in page, name
        if spec.env:
            assert f"`{spec.env}`" in page, name


def test_file_keys_are_the_camel_case_of_the_names():
    assert [config.file_key(n) for n in ("max_tool_calls", "isolation_max_copy_mb", "pi")] == \
        ["maxToolCalls", "isolationMaxCopyMb", "pi"]


def test_configure_returns_settings_shown_on_one_line_with_what_changed_and_from_where(project):
    shown = repr(nbsubagents.configure(question_timeout=120))
    assert "\n" not in shown and len(shown) < 100, shown
    assert shown.startswith("Settings(question_timeout=120") and "(configure())" in shown
    assert f"{len(config.SPECS) - 1} more at their defaults" in shown
