"""The model list read from pi's own files is exactly what the real ``pi --list-models`` prints, and where it
cannot be sure it leaves the answer to pi. Marked pi_matrix: `make test` runs each case against both pinned pi
versions (helpers.PI), whose differences catalogue.py holds as data."""

from __future__ import annotations

import json
import os

import pytest
from helpers import PI, REPO

from nbsubagents.pi import catalogue, models
from nbsubagents.pi.catalogue import _ENV_KEYS, _RULES, VERIFIED, read_available
from nbsubagents.pi.locate import pi_package

pytestmark = pytest.mark.pi_matrix
PINNED = str(PI)  # a pi whose rules catalogue.py reproduces (make test: each pinned version in turn)
PACKAGE = pi_package(PINNED)
# pi 0.73.1: its built-in models are read too; pi 1.x: only while no built-in provider can be configured.
LISTS_BUILTINS = PACKAGE is not None and _RULES[(PACKAGE.name, PACKAGE.version)].lists_builtins
DEMO = {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "dummy-key",
        "compat": {"supportsDeveloperRole": False},
        "models": [{"id": "scripted", "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}}]}
MODELS_JSON_WITH_COMMENTS = """{
  // pi strips line comments and trailing commas
  "providers": {
    "demo": %s,
    "anthropic": {"models": [{"id": "my-claude", "name": "Mine // not a comment"},],},
    "openai": {"baseUrl": "https://proxy.example/v1", "apiKey": "OPENAI_PROXY_KEY"},
  },
}""" % json.dumps(DEMO)


# Custom providers only, valid for both versions: comments and trailing commas, every compat field, a duplicate
# id, a command as the key, a provider without models and without a key, names that test pi's sort order.
CUSTOM_PROVIDERS = """{
  // custom providers
  "providers": {
    "demo": %s,
    "Zeta-Lab": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "!printf k",
      "compat": %s,
      "models": [{"id": "b_2"}, {"id": "B-1", "reasoning": true, "thinkingLevelMap": {"high": "hi", "off": null},
                  "input": ["text", "image"]}, {"id": "a.10", "name": "A // 10"}, {"id": "b_2", "name": "again"},],
    },
    "alpha": {"baseUrl": "http://127.0.0.1:9", "api": "anthropic-messages", "apiKey": "k",
              "models": [{"id": "x", "api": "openai-responses", "baseUrl": "http://127.0.0.1:9/v1"}]},
    "nokey": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "headers": {"X-A": "b"}},
  },
}""" % (json.dumps(DEMO), json.dumps({**dict.fromkeys(sorted(catalogue._COMPAT_BOOLS), True),
                                      "maxTokensField": "max_tokens", "thinkingFormat": "qwen",
                                      "cacheControlFormat": "anthropic"}))


@pytest.fixture
def agent(tmp_path, monkeypatch):
    """An empty agent dir, no provider key in the environment, and a working folder without a .pi."""
    for name in [n for n in os.environ if models._KEY_VARIABLE.search(n)]:
        monkeypatch.delenv(name)
    adir = tmp_path / "agent"
    adir.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(adir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return adir


def _both(adir):
    return read_available(PACKAGE, adir), models._ask_pi(PINNED)


def test_the_pi_under_test_is_one_whose_rules_are_reproduced():
    assert (PACKAGE.name, PACKAGE.version) in VERIFIED


def test_no_provider_means_no_model_as_pi_says(agent):
    ours, pis = _both(agent)
    assert ours == pis == ()


def test_custom_providers_in_models_json_as_pi_says(agent, tmp_path):
    (agent / "models.json").write_text(CUSTOM_PROVIDERS)
    (tmp_path / ".pi" / "subagents").mkdir(parents=True)  # a project as nbsubagents init leaves it
    (tmp_path / ".pi" / "settings.json").write_text('{\n  // the project\'s settings\n  "offline": false\n}\n')
    ours, pis = _both(agent)
    assert {"demo/scripted", "Zeta-Lab/B-1", "Zeta-Lab/b_2", "Zeta-Lab/a.10", "alpha/x"} == set(pis)
    assert ours == pis                                  # and in pi's order (ICU collation)


def test_every_provider_configured_lists_the_whole_catalogue_in_pis_order(agent, monkeypatch):
    for names in _ENV_KEYS.values():
        monkeypatch.setenv(names[-1], "k")
    monkeypatch.setenv("AWS_PROFILE", "p")
    if not LISTS_BUILTINS:
        assert read_available(PACKAGE, agent) is None  # its built-in lists are not read: pi is asked
        return
    ours, pis = _both(agent)
    assert len(pis) > 900
    assert ours == pis


def test_auth_json_keys_comments_and_custom_models_of_built_in_providers_as_pi_says(agent, monkeypatch):
    (agent / "models.json").write_text(MODELS_JSON_WITH_COMMENTS)
    (agent / "auth.json").write_text(json.dumps({"anthropic": {"type": "api_key", "key": "sk-x"}, "xai": {},
                                                 "groq": ""}))  # pi counts an empty object, not an empty string
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")       # half of a key pair configures nothing
    if not LISTS_BUILTINS:
        assert read_available(PACKAGE, agent) is None
        return
    ours, pis = _both(agent)
    assert "anthropic/my-claude" in pis and "demo/scripted" in pis and any(m.startswith("openai/") for m in pis)
    assert any(m.startswith("xai/") for m in pis)
    assert not any(m.startswith(("amazon-bedrock/", "groq/")) for m in pis)
    assert ours == pis


def test_a_models_json_pi_rejects_is_left_to_pi(agent):
    (agent / "models.json").write_text(json.dumps({"providers": {"demo": {**DEMO, "apiKey": None}}}))
    assert read_available(PACKAGE, agent) is None
    assert models._ask_pi(PINNED) == ()                # pi keeps only its built-ins, and none is configured


@pytest.mark.parametrize("setup", ["extension", "project extension", "project package", "package", "oauth",
                                   "migration", "modelOverrides", "NaN", "broken auth", "$schema"])
def test_what_the_files_cannot_tell_is_left_to_pi(agent, tmp_path, setup):
    (agent / "models.json").write_text(json.dumps({"providers": {"demo": DEMO}}))
    (tmp_path / ".pi" / "agents").mkdir(parents=True)  # a project's presets and commented settings tell nothing
    (tmp_path / ".pi" / "settings.json").write_text('{\n  // "packages": ["npm:x"]\n  "offline": true\n}\n')
    assert read_available(PACKAGE, agent) == ("demo/scripted",)
    if setup == "extension":
        (agent / "extensions").mkdir()
    elif setup == "project extension":
        (tmp_path / ".pi" / "extensions").mkdir()
    elif setup == "project package":
        (tmp_path / ".pi" / "settings.json").write_text(json.dumps({"packages": ["npm:pi-some-provider"]}))
    elif setup == "package":
        (agent / "settings.json").write_text(json.dumps({"packages": ["npm:pi-some-provider"]}))
    elif setup == "oauth":
        (agent / "auth.json").write_text(json.dumps({"github-copilot": {"type": "oauth", "refresh": "r"}}))
    elif setup == "migration":
        (agent / "oauth.json").write_text("{}")
    elif setup == "modelOverrides":
        (agent / "models.json").write_text(json.dumps({"providers": {"demo": {**DEMO, "modelOverrides": {}}}}))
    elif setup == "NaN":  # Python's json reads it, pi's JSON.parse does not
        (agent / "models.json").write_text(json.dumps({"providers": {"demo": {**DEMO, "models": [
            {"id": "scripted", "contextWindow": float("nan")}]}}}))
    elif setup == "$schema":  # a top-level field beside providers
        (agent / "models.json").write_text(json.dumps({"$schema": 1, "providers": {"demo": DEMO}}))
    else:
        (agent / "auth.json").write_text("{not json")
    assert read_available(PACKAGE, agent) is None


@pytest.mark.parametrize("setup", ["LLAMA_BASE_URL", "ANTHROPIC_FEDERATION_RULE_ID", "application default credentials",
                                   "stored key", "built-in provider in models.json", "key template"])
def test_without_its_built_in_lists_whatever_may_configure_a_built_in_provider_is_left_to_pi(agent, tmp_path,
                                                                                              monkeypatch, setup):
    """pi 1.3.0 (whose built-in lists are not read), whichever pi this pass tests: no pi starts here."""
    package = pi_package(str(REPO / "pi1" / "node_modules" / ".bin" / "pi"))
    assert package is not None and not _RULES[(package.name, package.version)].lists_builtins
    (agent / "models.json").write_text(json.dumps({"providers": {"demo": DEMO}}))
    assert read_available(package, agent) == ("demo/scripted",)
    if setup in ("LLAMA_BASE_URL", "ANTHROPIC_FEDERATION_RULE_ID"):
        monkeypatch.setenv(setup, "x")
    elif setup == "application default credentials":
        adc = tmp_path / "home" / ".config" / "gcloud" / "application_default_credentials.json"
        adc.parent.mkdir(parents=True)
        adc.write_text("{}")
    elif setup == "stored key":
        (agent / "auth.json").write_text(json.dumps({"demo": {"type": "api_key", "key": "k"}}))
    elif setup == "built-in provider in models.json":
        (agent / "models.json").write_text(json.dumps({"providers": {"demo": DEMO, "openai": {"apiKey": "k"}}}))
    else:
        (agent / "models.json").write_text(json.dumps({"providers": {"demo": {**DEMO, "apiKey": "$DEMO_KEY"}}}))
    assert read_available(package, agent) is None


def test_another_pi_version_is_left_to_pi(agent, tmp_path):
    newer = type(PACKAGE)(PACKAGE.name, "0.74.0", PACKAGE.path, PACKAGE.node)
    assert read_available(newer, agent) is None
    assert read_available(None, agent) is None


def test_a_cold_cache_resolves_from_the_files_without_starting_pi(agent, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (agent / "models.json").write_text(json.dumps({"providers": {"demo": DEMO}}))
    models.clear_cache()

    def no_pi(pi):
        raise AssertionError("pi was started")

    monkeypatch.setattr(models, "_ask_pi", no_pi)
    choice = models.choose_model("scripted", "p", None, PINNED)
    assert choice.resolved == "demo/scripted"
    with pytest.raises(models.ModelError, match='Unknown model "demo/scriptd"'):
        models.choose_model("demo/scriptd", "p", None, PINNED)
    (agent / "extensions").mkdir()                     # now only pi can tell
    models.clear_cache()
    with pytest.raises(AssertionError, match="pi was started"):
        models.available_models(PINNED)
