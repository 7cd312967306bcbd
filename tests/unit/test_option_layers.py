"""One table of options: each run option declares the preset field and the setting below the call that may give
it; ``resolve`` applies call > preset > settings > default and says where each value came from, which a run's
record keeps and doctor shows."""

from __future__ import annotations

import json
from pathlib import Path
from dataclasses import fields

from nbsubagents import _config as config, _doctor as doctor
from nbsubagents._child import budgets
from nbsubagents._lifecycle import prepare as preparing
from nbsubagents._lifecycle.prepare import prepare
from nbsubagents._lifecycle.spec import TaskSpec, _declared, resolve
from nbsubagents._preset_files import get as get_preset
from nbsubagents._preset_files.parse import Preset


def test_the_presets_fields_and_the_settings_keys_are_held_to_the_option_table():
    declared = {o.name: o for o in _declared()}
    preset_fields = {f.name for f in fields(Preset)}
    setting_keys = {f.name for f in fields(config.Settings)}
    for o in declared.values():
        if o.preset:
            head, _, key = o.preset.partition(".")
            assert head in preset_fields and (not key or key in budgets.FIELDS), o.name
        if o.setting:
            assert o.setting in setting_keys, o.name
    # a preset field or a setting spelt like a run option is that option's layer, declared on it
    assert {name for name in preset_fields & declared.keys() if name != "name"} == {
        name for name, o in declared.items() if o.preset == name}
    assert setting_keys & declared.keys() == {name for name, o in declared.items() if o.setting == name}
    assert {o.preset for o in declared.values() if (o.preset or "").startswith("budget.")} == {
        f"budget.{key}" for key in budgets.FIELDS}


def test_the_call_beats_the_preset_beats_the_settings_beats_the_default(project):
    (project / ".pi" / "subagents" / "slow.md").write_text(
        "---\nname: slow\ndescription: d\nmodel: demo/scripted\ntimeout: 45\nmaxTurns: 3\n---\nBody.\n")
    (project / ".pi" / "settings.json").write_text(json.dumps({"subagents": {"maxTurns": 9, "maxCost": 2.5}}))
    preset = get_preset("slow", project)
    chosen = resolve(TaskSpec("slow", "t", timeout=12), preset, config.current(project))
    assert chosen["timeout"] == (12, "call")
    assert chosen["max_turns"] == (3, 'preset "slow"')
    assert chosen["max_cost"] == (2.5, str(project / ".pi" / "settings.json"))
    assert chosen["max_tokens"] == (None, "default") and chosen["isolation"] == (None, "default")
    assert resolve(TaskSpec("slow", "t"), preset, config.current(project))["timeout"] == (45, 'preset "slow"')
    config.configure(timeout=30)
    try:
        assert resolve(None, None, config.current(project))["timeout"] == (30, "configure()")
    finally:
        config.reset()
    assert resolve(None, None, config.current(project))["timeout"] == (600.0, "default")


def test_a_runs_record_says_where_each_option_came_from(project):
    run = prepare(TaskSpec("scout", "ls", timeout=20, max_turns=4), mode="background", note=False)
    sources = json.loads(run.paths.meta.read_text())["sources"]
    assert sources["timeout"] == sources["max_turns"] == "call"
    assert sources["model"] == 'preset "scout"' and sources["isolation"] == "default"
    assert run.record.sources == sources


def test_doctor_shows_what_a_run_gets_where_the_call_and_preset_say_nothing(project):
    (project / ".pi" / "settings.json").write_text(json.dumps({"subagents": {"timeout": 90}}))
    lines = [check.detail for check in doctor.checks() if check.check == "run options"]
    assert any(line.startswith("timeout = 90 (") and str(project / ".pi" / "settings.json") in line
               for line in lines), lines
    assert any(line == "isolation = null (default)" for line in lines), lines


def test_a_call_reads_its_folders_settings_once_and_passes_them_down(project, monkeypatch):
    settings_file = project / ".pi" / "settings.json"
    settings_file.write_text(json.dumps({"subagents": {"timeout": 30}}))
    original = preparing.prepare

    def prepare_then_change_the_settings(spec, **kwargs):
        run = original(spec, **kwargs)
        settings_file.write_text(json.dumps({"subagents": {"timeout": 400, "maxTurns": 2}}))  # changed mid-call
        return run

    monkeypatch.setattr(preparing, "prepare", prepare_then_change_the_settings)
    runs = preparing.build_runs([{"preset": "scout", "task": "a"}, {"preset": "scout", "task": "b"}],
                                mode="background")
    assert [(r.record.timeout, r.record.budget) for r in runs] == [(30, None), (30, None)]  # the call's one reading
    assert runs[1].record.sources["timeout"] == str(settings_file)
    later = original(TaskSpec("scout", "c"), mode="background", note=False)  # the next call reads them again
    assert (later.record.timeout, later.record.budget["maxTurns"]) == (400, 2)


def test_a_runs_preset_notes_are_those_of_the_harness_that_runs_it(project, monkeypatch):
    claude = project / ".claude" / "agents"
    claude.mkdir(parents=True)
    (claude / "web.md").write_text("---\nname: web\ndescription: d\ntools: Read, WebFetch, mcp__docs__search\n---\n")
    monkeypatch.setenv("NBSUBAGENTS_CLAUDE", str(Path(__file__).resolve().parents[2] / "harnesses" / "node_modules"
                                                  / ".bin" / "claude"))
    under_pi = prepare(TaskSpec("web", "ls", model="demo/scripted"), mode="background", note=False)
    assert under_pi.record.preset_notes == ["tools a pi child cannot have are left out (no pi equivalent: WebFetch; "
                                            "MCP tools: mcp__docs__search)"]
    assert under_pi.record.ignored_tools == ["WebFetch", "mcp__docs__search"]
    under_claude = prepare(TaskSpec("web", "ls", harness="claude-code"), mode="background", note=False)
    assert under_claude.record.preset_notes is None and under_claude.record.ignored_tools is None
