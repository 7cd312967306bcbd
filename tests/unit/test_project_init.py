"""``nbsubagents.init()`` and ``nbsubagents init``: starter presets, a commented settings section and the ignore
lines, never overwriting what a person wrote, and saying what was made and what was skipped."""

from __future__ import annotations

import json

import pytest

from nbsubagents import _cli as cli, _config as config
from nbsubagents._config import NbSubagentsError
from nbsubagents._pi.offline import OFFLINE_MODEL
from nbsubagents._pi.offline import choice as offline_choice
from nbsubagents._preset_files.parse import parse_preset
from nbsubagents._project_init import IGNORE_LINES, STARTER_MODEL, init

PRESETS = ("scout", "editor", "reviewer")


@pytest.fixture(autouse=True)
def _clean_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "no-agent"))  # no machine settings leak in
    monkeypatch.delenv("NBSUBAGENTS_ROOT", raising=False)
    config.reset()
    yield
    config.reset()


def test_a_fresh_folder_gets_three_presets_commented_settings_and_the_ignore_lines(tmp_path):
    result = init(tmp_path / "new")  # a missing folder is made
    root = (tmp_path / "new").resolve()
    presets = {name: parse_preset(root / ".pi" / "subagents" / f"{name}.md", "project") for name in PRESETS}
    assert {name: p.tools for name, p in presets.items()} == {
        "scout": ("read", "grep", "find", "ls"), "editor": ("read", "edit", "write", "bash"),
        "reviewer": ("read", "grep", "find", "ls")}
    assert all(p.model == STARTER_MODEL and p.description and len(p.prompt) > 200 for p in presets.values())
    assert "file:line" in presets["reviewer"].description and "path:line" in presets["reviewer"].prompt
    section = json.loads((root / ".pi" / "settings.json").read_text())["subagents"]
    assert all(key.startswith("//") for key in section) and "offline" not in section
    for setting in ("timeout", "concurrency", "isolation", "maxCost", "offline"):
        assert any(setting in key for key in section), setting
    gitignore = (root / ".gitignore").read_text()
    assert [line for line in gitignore.splitlines() if not line.startswith("#")] == list(IGNORE_LINES)
    assert result.skipped == [] and result.made == [
        ".pi/subagents/scout.md", ".pi/subagents/editor.md", ".pi/subagents/reviewer.md", ".pi/settings.json",
        ".gitignore"]
    text = repr(result)
    assert text.startswith(f"nbsubagents init {root}\n  made  .pi/subagents/scout.md: explores, read-only")
    assert 'Next, from that folder: nbsubagents.run("scout", "ls .")' in text and "ANTHROPIC_API_KEY" in text
    assert "<code>.pi/settings.json</code>" in result._repr_html_()
    assert config.current(root).offline is False  # the comment keys are no settings


def test_existing_files_are_never_overwritten_and_are_reported_skipped(tmp_path):
    presets = tmp_path / ".pi" / "subagents"
    presets.mkdir(parents=True)
    mine = "---\nname: scout\ndescription: Mine.\nmodel: openai/gpt-4o\n---\nMy own scout.\n"
    (presets / "scout.md").write_text(mine)
    (presets / "my-editor.md").write_text("---\nname: editor\ndescription: Also mine.\n---\nEdit.\n")
    result = init(tmp_path)
    assert (presets / "scout.md").read_text() == mine
    assert not (presets / "editor.md").exists()  # another file already names a preset "editor"
    assert (presets / "reviewer.md").exists()
    assert result.skipped == [".pi/subagents/scout.md", ".pi/subagents/editor.md"]
    assert "skipped  .pi/subagents/scout.md: exists (kept as it is)" in repr(result)
    assert "skipped  .pi/subagents/editor.md: my-editor.md is already a preset named editor" in repr(result)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    again = init(tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert again.made == [] and len(again.skipped) == 5


def test_the_ignore_lines_are_appended_once_keeping_the_files_own_lines(tmp_path):
    (tmp_path / ".gitignore").write_text("node_modules/\n/.pi/subagents/runs\n*.pyc")  # no final newline
    first = init(tmp_path)
    init(tmp_path)
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[:3] == ["node_modules/", "/.pi/subagents/runs", "*.pyc"]  # kept, and runs/ counted as there
    assert [line for line in lines[3:] if line and not line.startswith("#")] == list(IGNORE_LINES[1:])
    assert (tmp_path / ".gitignore").read_text().endswith("experiments/\n")
    assert ("added", ".gitignore", ", ".join(IGNORE_LINES[1:])) in first.steps
    assert sum(line.startswith("#") for line in lines) == 1


def test_an_existing_pi_settings_file_is_merged_never_rewritten(tmp_path):
    settings = tmp_path / ".pi" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"theme": "dark", "defaultModel": "sonnet"}))
    result = init(tmp_path)
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark" and data["defaultModel"] == "sonnet" and "//" in data["subagents"]
    assert ("added", ".pi/settings.json",
            'the "subagents" section (its // keys explain the settings) beside theme, defaultModel') in result.steps

    settings.write_text(json.dumps({"theme": "dark", "subagents": {"timeout": 900}}))
    result = init(tmp_path)
    assert json.loads(settings.read_text()) == {"theme": "dark", "subagents": {"timeout": 900}}
    assert ("skipped", ".pi/settings.json", 'it already has a "subagents" section (left as it is)') in result.steps

    result = init(tmp_path, offline=True)  # only the offline key is added to a section that lacks it
    assert json.loads(settings.read_text()) == {"theme": "dark", "subagents": {"timeout": 900, "offline": True}}
    assert ("added", ".pi/settings.json", '"offline": true to its "subagents" section') in result.steps
    assert result.offline and "scripted model demo/scripted" in repr(result)
    assert config.current(tmp_path).offline is True and config.current(tmp_path).timeout == 900


def test_offline_makes_the_projects_setting_true(tmp_path):
    result = init(tmp_path, offline=True)
    assert json.loads((tmp_path / ".pi" / "settings.json").read_text())["subagents"]["offline"] is True
    assert config.current(tmp_path).offline is True and result.offline
    assert '"offline": true' in repr(result)


def test_offline_choice_keeps_what_was_asked_and_resolves_to_the_scripted_model():
    from nbsubagents._child import harnesses

    pi, claude = harnesses.get("pi"), harnesses.get("claude-code")  # no model on the call: pi is not asked
    asked = offline_choice(None, STARTER_MODEL, "pi", pi)
    assert (asked.requested, asked.source, asked.resolved, asked.argv_model, asked.note) == (
        STARTER_MODEL, "preset", OFFLINE_MODEL, OFFLINE_MODEL, None)
    called = offline_choice("openai/gpt-4o", STARTER_MODEL, "claude", claude)  # a harness that lists no models
    assert (called.source, called.resolved) == ("call", OFFLINE_MODEL) and "which answers instead" in called.note
    assert offline_choice(None, None, "pi", pi).requested is None  # a preset without a model runs offline too
    # the scripted model's own names need no pi to list models ("pi" here is no program: asking it would fail)
    assert offline_choice("demo/backup", STARTER_MODEL, "pi", pi).resolved == "demo/backup"


def test_a_file_is_no_project_folder(tmp_path, capsys):
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    with pytest.raises(NbSubagentsError, match=r"notes.txt: it is a file\. Name a folder"):
        init(afile)
    assert cli.main(["init", str(afile)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nbsubagents init: Cannot init") and "it is a file" in err
    assert afile.read_text() == "x"


def test_the_home_folder_is_no_project_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # ~/.pi is pi's agent dir: a project there would never be found
    with pytest.raises(NbSubagentsError, match=r"Cannot init the home folder .*nbsubagents init ~/myproject"):
        init(tmp_path)
    assert not (tmp_path / ".pi").exists()


def test_the_cli_prints_what_init_made(tmp_path, capsys):
    assert cli.main(["init", str(tmp_path), "--offline"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"nbsubagents init {tmp_path.resolve()}\n") and "made  .gitignore" in out
    assert config.current(tmp_path).offline is True
