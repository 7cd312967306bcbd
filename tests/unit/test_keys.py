"""The runs' keys (``child/keys.py``): private files in the person's state folder, and the MACs made with them."""

from __future__ import annotations

import os
import stat

import pytest

from nbsubagents._child import keys


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "nbsubagents" / "keys"


def test_a_key_is_a_private_file_in_the_state_folder_until_it_is_forgotten(state):
    key = keys.create("20260101-120000-a1b2c3")
    assert len(key) == 32 and keys.folder() == state
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state / "20260101-120000-a1b2c3").st_mode) == 0o600
    assert keys.create("20260101-120000-a1b2c3") == key == keys.load("20260101-120000-a1b2c3")  # kept, not remade
    keys.forget("20260101-120000-a1b2c3")
    assert keys.load("20260101-120000-a1b2c3") is None


@pytest.mark.parametrize("run_id", ["", "../escape", ".hidden"])
def test_a_key_is_named_by_a_run_id_only(state, run_id):
    with pytest.raises(ValueError, match="a run id names one run folder"):
        keys.create(run_id)
    assert keys.load(run_id) is None


def test_a_mac_holds_for_its_key_its_purpose_and_every_field():
    key, other = os.urandom(32), os.urandom(32)
    signed = keys.sign(key, "message", {"kind": "answer", "requestId": "q1", "value": True})
    assert keys.verified(key, "message", signed)
    assert not keys.verified(other, "message", signed)
    assert not keys.verified(key, "waiting", signed)
    assert not keys.verified(key, "message", {**signed, "value": False})
    assert not keys.verified(None, "message", signed)
    assert not keys.verified(key, "message", {"kind": "answer"}) and not keys.verified(key, "message", [1])
