"""Model names as pi reads them, the unknown-model message, and the on-disk model-list cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from nbsubagents._pi import models
from nbsubagents._child.harnesses.pi import parse_model_table
from nbsubagents._pi.models import ModelError, closest_models, match_model

CLAUDE = ("anthropic/claude-3-5-haiku-20241022", "anthropic/claude-3-5-haiku-latest",
          "anthropic/claude-opus-4-1", "anthropic/claude-opus-4-1-20250805",
          "anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5-20250929",
          "anthropic/claude-sonnet-4-20250514", "openai/gpt-4o", "openai/gpt-4o-mini",
          "github-copilot/gpt-4o", "openrouter/openai/gpt-4o:extended")


@pytest.mark.parametrize("name, expected", [
    ("anthropic/claude-sonnet-4-5", ("anthropic/claude-sonnet-4-5", None)),
    ("Anthropic/Claude-Sonnet-4-5", ("anthropic/claude-sonnet-4-5", None)),
    ("claude-opus-4-1-20250805", ("anthropic/claude-opus-4-1-20250805", None)),
    ("sonnet", ("anthropic/claude-sonnet-4-5", None)),        # an alias (no date) wins over dated ids
    ("opus", ("anthropic/claude-opus-4-1", None)),
    ("haiku", ("anthropic/claude-3-5-haiku-latest", None)),   # -latest counts as an alias
    ("sonnet-4-2025", ("anthropic/claude-sonnet-4-20250514", None)),  # only dated matches: the latest
    ("sonnet:high", ("anthropic/claude-sonnet-4-5", "high")),
    ("anthropic/sonnet:xhigh", ("anthropic/claude-sonnet-4-5", "xhigh")),
    ("github-copilot/gpt-4o", ("github-copilot/gpt-4o", None)),
    ("openai/gpt-4o:extended", ("openrouter/openai/gpt-4o:extended", None)),  # an id with a slash and colon
    ("gpt-4o-mini", ("openai/gpt-4o-mini", None)),
])
def test_names_resolve_as_pi_model_does(name, expected):
    assert match_model(name, CLAUDE) == expected


@pytest.mark.parametrize("name", ["gemini", "anthropic/gpt-9", "sonnet:ultra", ""])
def test_names_pi_cannot_resolve_are_none(name):
    assert match_model(name, CLAUDE) is None


def test_model_table_parsing_ignores_the_no_models_message_and_warnings():
    assert parse_model_table("No models available. Use /login to log into a provider via OAuth or API key. See:\n"
                             "  /x/docs/providers.md\n") == ()
    table = ("provider   model            context  max-out  thinking  images\n"
             "demo       scripted         128K     4.1K     no        no\n"
             "anthropic  claude-opus-4-1  200K     32K      yes       yes\n")
    assert parse_model_table(table) == ("demo/scripted", "anthropic/claude-opus-4-1")
    warning = "Warning: Invalid settings file /p/.pi/settings.json: Expected property name (line 2 column 3)\n"
    assert parse_model_table(table + "\n" + warning) == ("demo/scripted", "anthropic/claude-opus-4-1")


def test_unknown_model_message_is_short_with_count_and_closest_matches():
    many = tuple(f"prov{i % 7}/model-{i:03d}" for i in range(400)) + CLAUDE
    message = models.unknown_model_message("claude-sonet", 'preset "r"', many)
    assert message.startswith('Unknown model "claude-sonet" (from preset "r"). pi has 411 models; the closest: ')
    listed = message.split("the closest: ")[1].split(". ")[0].split(", ")
    assert len(listed) == 10 and listed[0].startswith("anthropic/claude-sonnet")
    assert len(message) < 600
    assert "`nbsubagents doctor` or `pi --list-models` lists them all." in message
    assert closest_models("gpt-4o", many, limit=3)[0] in ("openai/gpt-4o", "github-copilot/gpt-4o")


def test_unknown_model_without_any_provider_says_how_to_configure_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    message = models.unknown_model_message("sonnet", "the call's model=", ())
    assert "No/models" not in message and "Available models" not in message
    assert "pi has no model whose provider is configured" in message
    assert "ANTHROPIC_API_KEY" in message and "/login" in message and "use_scripted_model()" in message
    assert "`nbsubagents init --offline`" in message
    assert str(tmp_path / "agent" / "models.json") in message


def test_inherit_means_no_model_and_says_so(project):
    with pytest.raises(ModelError, match='"inherit" means the caller.s model, and a notebook has none'):
        models.choose_model("inherit", "p", None, "pi")


# --- the cache --------------------------------------------------------------------------------


def _cold_resolve_seconds(project, env: dict) -> tuple[float, str]:
    """Resolve a model in a fresh interpreter; return the time and whether pi was started (via a PATH spy)."""
    code = ("import time, nbsubagents._pi.models as m, nbsubagents._pi as c; t = time.perf_counter();"
            "m.available_models(c.find_pi()); print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=project, timeout=120).stdout
    return float(out.strip()), out


def test_model_list_is_cached_on_disk_and_keyed_by_files(project, tmp_path, monkeypatch):
    cache_home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    spy = tmp_path / "spy-pi"
    log = tmp_path / "pi-calls.log"
    real = os.environ["NBSUBAGENTS_PI"]
    from nbsubagents._pi import pi_command
    spy.write_text("#!/bin/sh\necho \"$@\" >> " + str(log) + "\nexec " +
                   " ".join(f"'{p}'" for p in pi_command(real)) + " \"$@\"\n")
    spy.chmod(0o755)
    env = {**os.environ, "NBSUBAGENTS_PI": str(spy)}
    models.clear_cache()

    _cold_resolve_seconds(project, env)
    assert log.read_text().count("--list-models") == 1
    cached = json.loads((cache_home / "nbsubagents" / "models.json").read_text())
    assert cached and all(entry["models"] == ["demo/scripted"] for entry in cached.values())
    assert "dummy-key" not in json.dumps(cached)

    seconds, _ = _cold_resolve_seconds(project, env)   # a fresh process, nothing changed: pi is not asked
    assert log.read_text().count("--list-models") == 1

    agent = os.environ["PI_CODING_AGENT_DIR"]
    models_json = os.path.join(agent, "models.json")
    later = time.time() + 5
    os.utime(models_json, (later, later))               # the providers changed: ask pi again
    _cold_resolve_seconds(project, env)
    assert log.read_text().count("--list-models") == 2

    _cold_resolve_seconds(project, {**env, "MISTRAL_API_KEY": "secret-value"})  # a key variable appeared
    assert log.read_text().count("--list-models") == 3
    assert "secret-value" not in (cache_home / "nbsubagents" / "models.json").read_text()


def test_a_pi_that_cannot_list_models_is_a_clear_error_and_not_cached(project, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    broken = tmp_path / "pi"
    broken.write_text("#!/bin/sh\necho 'SyntaxError: enableCompileCache' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(ModelError, match=r"failed to list its models \(exit code 1\): SyntaxError: enableCompileCache"):
        models.available_models(str(broken))
    assert not (tmp_path / "empty-cache" / "nbsubagents" / "models.json").exists()
