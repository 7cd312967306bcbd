"""Model names of Claude Code agent files under pi (issue 54 item 4): a dated Anthropic id pi does not list maps to
its nearest, with a note; aliases resolve as before; any other unknown name is refused with the closest names.

The lists are pi's own answers (``pi --list-models`` with an Anthropic key set): pi 0.73.1 still lists
claude-sonnet-4-20250514, pi 1.3.0 no longer does (nor 1.6.0, where all 136 0xfurai agents were refused)."""

from __future__ import annotations

import pytest

from nbsubagents._pi import models
from nbsubagents._pi.models import ModelError, choose_model, match_model, nearest_model

PI_1 = ["anthropic/" + m for m in (
    "claude-fable-5 claude-fable-5-1 claude-haiku-4-5 claude-haiku-4-5-20251001 claude-haiku-5-5 claude-opus-4-5 "
    "claude-opus-4-5-20251101 claude-opus-4-6 claude-opus-4-7 claude-opus-4-8 claude-opus-5 claude-opus-5-5 "
    "claude-sonnet-4-5 claude-sonnet-4-5-20250929 claude-sonnet-4-6 claude-sonnet-5 claude-sonnet-5-5").split()]
PI_0 = ["anthropic/" + m for m in (
    "claude-3-5-haiku-20241022 claude-3-5-haiku-latest claude-3-5-sonnet-20240620 claude-3-5-sonnet-20241022 "
    "claude-3-7-sonnet-20250219 claude-3-haiku-20240307 claude-3-opus-20240229 claude-3-sonnet-20240229 "
    "claude-haiku-4-5 claude-haiku-4-5-20251001 claude-opus-4-0 claude-opus-4-1 claude-opus-4-1-20250805 "
    "claude-opus-4-20250514 claude-opus-4-5 claude-opus-4-5-20251101 claude-opus-4-6 claude-opus-4-7 "
    "claude-sonnet-4-0 claude-sonnet-4-20250514 claude-sonnet-4-5 claude-sonnet-4-5-20250929 claude-sonnet-4-6").split()]


@pytest.fixture
def pi_lists(monkeypatch):
    def use(listed):
        monkeypatch.setattr(models, "available_models", lambda program, harness=None: tuple(listed))
    return use


@pytest.mark.parametrize("name, nearest", [
    ("claude-sonnet-4-20250514", "anthropic/claude-sonnet-4-5"),   # every 0xfurai agent's model
    ("anthropic/claude-opus-4-1-20250805", "anthropic/claude-opus-4-5"),
    ("claude-3-5-haiku-20241022", "anthropic/claude-haiku-4-5"),   # the older shape: version before family
    ("claude-sonnet-9-20300101", "anthropic/claude-sonnet-5-5"),    # newer than any: the newest of its family
])
def test_a_dated_id_pi_1_does_not_list_runs_its_nearest_with_a_note(pi_lists, name, nearest):
    pi_lists(PI_1 + ["other/claude-sonnet-4-5", "bedrock/claude-sonnet-4-5-20250929"])
    assert match_model(name, PI_1) is None  # as before: not a name pi resolves itself
    choice = choose_model(None, "python-expert", name, "pi")
    assert (choice.resolved, choice.requested, choice.source) == (nearest, name, "preset")
    assert choice.note == (f'model "{name}" (from preset "python-expert") is not one pi has here; its nearest, '
                           f"{nearest}, is used (pi's models: `pi --list-models`)")


def test_a_dated_id_pi_lists_is_used_as_it_is(pi_lists):
    pi_lists(PI_0)
    choice = choose_model(None, "python-expert", "claude-sonnet-4-20250514", "pi")
    assert (choice.resolved, choice.note) == ("anthropic/claude-sonnet-4-20250514", None)


def test_the_nearest_prefers_the_named_provider_then_anthropic_then_an_alias():
    listed = ["zeta/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5",
              "proxy/claude-sonnet-4-5"]
    assert nearest_model("claude-sonnet-4-20250514", listed) == "anthropic/claude-sonnet-4-5"
    assert nearest_model("proxy/claude-sonnet-4-20250514", listed) == "proxy/claude-sonnet-4-5"
    assert nearest_model("claude-sonnet-4-20250514", ["proxy/claude-sonnet-4-5"]) == "proxy/claude-sonnet-4-5"


@pytest.mark.parametrize("listed, alias, resolved", [
    (PI_1, "sonnet", "anthropic/claude-sonnet-5-5"), (PI_1, "opus", "anthropic/claude-opus-5-5"),
    (PI_1, "haiku", "anthropic/claude-haiku-5-5"), (PI_1, "fable", "anthropic/claude-fable-5-1"),
    (PI_0, "sonnet", "anthropic/claude-sonnet-4-6"), (PI_0, "haiku", "anthropic/claude-haiku-4-5"),
])
def test_claude_aliases_resolve_as_before_without_a_note(pi_lists, listed, alias, resolved):
    pi_lists(listed)
    choice = choose_model(None, "p", alias, "pi")
    assert (choice.resolved, choice.note) == (resolved, None)


@pytest.mark.parametrize("listed, name", [
    (PI_0, "fable"),                        # pi 0.73.1 has no fable model: no nearest of another family
    (PI_1, "claude-mythos-2-20260101"),     # a family pi has no model of
    (PI_1, "gpt-5-20250807"),               # dated, but not an Anthropic id
    (PI_1, "sonet"),
])
def test_other_unknown_names_are_refused_with_the_closest(pi_lists, listed, name):
    pi_lists(listed)
    with pytest.raises(ModelError) as err:
        choose_model(None, "p", name, "pi")
    assert str(err.value).startswith(f'Unknown model "{name}" (from preset "p"). pi has {len(listed)} models; the '
                                     "closest: anthropic/claude-")


def test_a_dated_fallback_model_runs_its_nearest_with_a_note(monkeypatch):
    """fallbackModels are model names too: a dated id pi 1.x does not list is its nearest, said in a note; an unknown
    name is still an error naming the closest."""
    from nbsubagents._lifecycle import prepare

    monkeypatch.setattr(prepare, "available_models", lambda program, harness=None: tuple(PI_1))
    resolved, notes = prepare._resolve_models(["claude-opus-4-20250514", "anthropic/claude-sonnet-4-5"],
                                              "preset fallbackModels", "pi", None)
    assert resolved == ["anthropic/claude-opus-4-5", "anthropic/claude-sonnet-4-5"]
    assert notes == ['fallback model "claude-opus-4-20250514" (from preset fallbackModels) is not one pi has here; '
                     "its nearest, anthropic/claude-opus-4-5, is used (pi's models: `pi --list-models`)"]
    with pytest.raises(ModelError, match="claude-sonet-4-5"):
        prepare._resolve_models(["anthropic/claude-sonet-4-5"], "preset fallbackModels", "pi", None)
