"""Secrets masked and control characters made harmless (issue 22, items 3, 4 and 9): the pure functions of
``child.secrets``, the ``secret_patterns`` setting, and the Markdown escaping of reports (read back by a real
CommonMark parser, mistune)."""

from __future__ import annotations

import io
import json

import pytest

from nbsubagents import NbSubagentsError, _config as config
from nbsubagents._child.secrets import MASK, Masker, needed_only, secret_values
from nbsubagents._child.text import strip_controls, terminal_safe, write_line
from nbsubagents._views import masking
from nbsubagents._views.reports import _code, md_line

KEY = "sk-test-SUPERSECRETVALUE0123456789abcdef"


def test_a_key_cut_short_by_a_truncation_is_still_masked():
    masks = Masker([KEY])
    for cut in ("sk-test-SUPERSECRETVALUE012345…", "sk-test-SUPERSECRETVALUE012345...", KEY[:12] + "…"):
        shown = masks.text(f"Running: echo {cut}")
        assert "SUPERSECRET" not in shown and MASK in shown, shown
    plain = Masker(["correct-horse-battery-staple"])  # no key shape: only its value says it is one
    assert plain.text("pw is correct-horse-bat… and more") == f"pw is {MASK}… and more"
    assert plain.text("cut: correct… short") == "cut: correct… short"  # 8 characters at least
    assert plain.text("correct-h") == "correct-h"  # no ellipsis: an ordinary word stays


def test_pieces_of_a_key_streamed_in_deltas_are_masked_for_exports():
    stream = "".join(json.dumps({"type": "toolcall_delta", "delta": piece}) + "\n" for piece in
                     ("echo sk-tes", "t-SUPERSECRETVALUE012345", "6789abcdef", " and more"))
    masked = Masker([KEY]).text(stream, pieces=True)
    assert "SUPERSECRET" not in masked and "6789abcdef" not in masked and " and more" in masked
    assert Masker([KEY]).text("x 3456789abcdef-more y", pieces=True) == f"x {MASK}-more y"  # ends, then more
    words = "the word SUPERSECRETVALUE alone, and ordinary-words-here stay"
    assert Masker([KEY]).text(words, pieces=True) == "the word •••••• alone, and ordinary-words-here stay"
    assert Masker([KEY]).text(stream) == stream  # without pieces: whole forms only (reports, records, browse)


def test_html_and_json_forms_and_nested_data_are_masked():
    secret = 'p&ss<"word>-1234'
    masks = Masker([secret])
    assert masks.text(json.dumps({"k": secret})) == json.dumps({"k": MASK}, ensure_ascii=False)
    assert "ss" not in masks.text("<td>p&amp;ss&lt;&quot;word&gt;-1234</td>").replace("class", "")
    data = masks.data({"task": f"use {secret}", "n": 3, "list": [secret, {"deep": secret}], secret: "key"})
    assert data == {"task": f"use {MASK}", "n": 3, "list": [MASK, {"deep": MASK}], MASK: "key"}


@pytest.mark.parametrize("text", [
    "sk-proj-Ab3dEfGhIjKlMnOpQrStUv", "sk-ant-api03-abcdefghijklmnop123", "ghp_" + "a1B2" * 9,
    "github_pat_11ABCDEFG0123456789_abcdefghij", "xoxb-123456789012-abcdefghij", "AKIAIOSFODNN7EXAMPLE",
    "AIzaSyA-1234567890abcdefghijklmnop", "hf_" + "x1" * 15, "glpat-abcdefghij0123456789",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc"])
def test_common_key_shapes_are_masked(text):
    shown = Masker().text(f"key: {text} end")
    assert shown == f"key: {MASK} end", shown


def test_bearer_assignments_and_private_keys_keep_their_label():
    masks = Masker()
    assert masks.text("Authorization: Bearer abc.DEF-123_456") == f"Authorization: Bearer {MASK}"
    assert masks.text("export ACME_API_KEY=zz9-plural-z-alpha") == f"export ACME_API_KEY={MASK}"
    assert masks.text('{"GITHUB_TOKEN": "0123456789abcdef"}') == '{"GITHUB_TOKEN": "' + MASK + '"}'
    block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----"
    assert masks.text(f"x\n{block}\ny") == f"x\n{MASK}\ny"


@pytest.mark.parametrize("text", [
    "pip install scikit-learn sk-learn", "max_tokens=100000000", "Bearer tokens are short-lived",
    "demo/scripted", "TOKENIZERS_PARALLELISM=false", "the keyboard and the passwords page", "ask-me-anything"])
def test_ordinary_words_stay(text):
    assert Masker().text(text) == text


def test_secret_values_from_environment_names_and_pi_config(tmp_path):
    (tmp_path / "auth.json").write_text(json.dumps({"acme": {"type": "api_key", "key": "auth-json-key-123"}}))
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"x": {"apiKey": "NAMED_VAR"}}}))
    env = {"GITHUB_TOKEN": "gho_token_value_1", "DB_PASSWORD": "hunter2hunter2", "MY_SECRET_SAUCE": "saucy-secret",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG", "SHORT_KEY": "1234567", "SSL_KEY_FILE": str(tmp_path),
           "HOME": "/home/me", "NAMED_VAR": "value-from-named-var"}
    found = secret_values(env, tmp_path)
    for value in ("gho_token_value_1", "hunter2hunter2", "saucy-secret", "wJalrXUtnFEMI/K7MDENG",
                  "auth-json-key-123", "value-from-named-var"):
        assert value in found
    assert "1234567" not in found and str(tmp_path) not in found and "/home/me" not in found


def test_secret_patterns_setting_adds_ones_own_and_refuses_bad_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("NBSUBAGENTS_ROOT", str(tmp_path))
    config.reset()
    try:
        assert "corp-0123abcd" in masking.mask_text("id corp-0123abcd")
        config.configure(secret_patterns=[r"corp-[0-9a-f]{8}", r"pin=(?P<secret>\d{4})"])
        assert masking.mask_text("id corp-0123abcd, pin=1234") == f"id {MASK}, pin={MASK}"
        with pytest.raises(NbSubagentsError, match=r"configure\(secret_patterns=...\): '\(unclosed' is not a "
                                                   r"regular expression"):
            config.configure(secret_patterns=["(unclosed"])
        with pytest.raises(NbSubagentsError, match="must be a list of regular expressions"):
            config.configure(secret_patterns=42)
        config.reset()
        (tmp_path / ".pi").mkdir()
        (tmp_path / ".pi" / "settings.json").write_text(json.dumps({"subagents": {"secretPatterns": ["tok_[a-z]+"]}}))
        assert masking.mask_text("a tok_abcdef b") == f"a {MASK} b"
        (tmp_path / ".pi" / "settings.json").write_text(json.dumps({"subagents": {"secretPatterns": ["[bad"]}}))
        with pytest.raises(NbSubagentsError, match=r'settings.json: "subagents.secretPatterns": \'\[bad\''):
            masking.mask_text("x")
    finally:
        config.reset()


def test_terminal_safe_shows_control_characters_escaped():
    hostile = ("ok\tcol\nline \x1b]52;c;ZXZpbA==\x07 \x1b]0;pwned title\x07 \x1b[2J\x1b[H \x9b31m nul\x00 del\x7f "
               "bell\x07 cr\r \u202eevil")
    shown = terminal_safe(hostile)
    assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7f <= ord(c) <= 0x9f for c in shown)
    assert "\u202e" not in shown
    assert shown.startswith("ok\tcol\nline \\x1b]52;c;ZXZpbA==\\x07 \\x1b]0;pwned title\\x07 \\x1b[2J")
    assert "\\x9b31m" in shown and "nul\\x00" in shown and "del\\x7f" in shown and "\\u202eevil" in shown


def test_a_printed_line_shows_control_characters_escaped():
    stream = io.StringIO()
    assert write_line(stream, "Asks for approval: rm -rf ~\x1b[2K\r\x1b]0;ok\x07 ls")
    assert stream.getvalue() == "Asks for approval: rm -rf ~\\x1b[2K\\x0d\\x1b]0;ok\\x07 ls\n"


def test_strip_controls_removes_escape_sequences_and_bytes():
    text = "a\x00b \x1b[31mred\x1b[0m \x1b]0;title\x07t \x1b]52;c;ZXZpbA==\x1b\\c \x9bx\x7f\r\n\tend"
    assert strip_controls(text) == "ab red t c x\n\tend"


def test_markdown_names_and_file_names_cannot_break_out():
    mistune = pytest.importorskip("mistune")
    md = mistune.create_markdown(escape=False, plugins=["table"])
    name = "evil`](http://x) <img src=x onerror=alert(1)> | # **b** _i_ ~~s~~ &amp; [l](u)\n# not a heading"
    heading = md("## " + md_line(name))
    assert "<img" not in heading and "<strong>" not in heading and "<a " not in heading and "<del>" not in heading
    assert heading.count("<h") == 1 and heading.count("<h1") == 0
    table = md("| a | b |\n|---|---|\n| " + md_line(name) + " | x |")
    assert table.count("<td>") == 2 and "<img" not in table
    for file in ("a``b.py", "`x`", "x` <img src=x> `z", "n\n# h.py", "ends with `"):
        rendered = md("- files: " + _code(file) + " done")
        assert rendered.count("<code>") == 1 and "<img" not in rendered and "<h1" not in rendered, rendered
        assert rendered.split("<code>")[1].split("</code>")[1].strip().startswith("done"), rendered


def test_base64_and_hex_forms_of_a_secret_are_masked_inside_longer_encoded_text():
    import base64

    secret = "Zq7vK2mXw9RtB4nLp8sYc3HdF6gJ1uEa"
    masks = Masker([secret])
    for before in ("", "G", "GI", "GITHUB_TOKEN="):
        encoded = base64.b64encode(f"{before}{secret}\n".encode()).decode()
        assert MASK in masks.text(encoded) and encoded[len(before) + 8:-8] not in masks.text(encoded)
    assert masks.text(f"hex {secret.encode().hex()}.") == f"hex {MASK}."


def test_pieces_masks_a_start_of_a_secret_and_a_piece_of_one_but_not_ordinary_words():
    secret = "Zq7vK2mXw9RtB4nLp8sYc3HdF6gJ1uEa"
    masks = Masker([secret, "correcthorsebattery"])
    assert masks.text("first Zq7vK2mX then B4nLp8sYc3Hd", pieces=True) == f"first {MASK} then {MASK}"
    assert masks.text("Zq7vK2m is short; correct horses", pieces=True) == "Zq7vK2m is short; correct horses"


def test_a_child_keeps_only_the_secret_named_variables_it_needs():
    env = {"PATH": "/bin", "GITHUB_TOKEN": "g" * 20, "OPENAI_API_KEY": "o" * 20, "MY_PASSWORD": "p" * 20,
           "NBS_GIVEN_KEY": "x"}
    assert needed_only(env, ("OPENAI_API_KEY",), {"NBS_GIVEN_KEY": "x"}) == {
        "PATH": "/bin", "OPENAI_API_KEY": "o" * 20, "NBS_GIVEN_KEY": "x"}


def test_a_pi_child_keeps_only_its_providers_keys(tmp_path, monkeypatch):
    """Its model's and fallbacks' providers' variables, and a key models.json names; every one when pi's default
    provider is its model's and pi's settings do not name it."""
    from nbsubagents._child.harnesses import pi
    from nbsubagents._child.record import RunRecord

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    (tmp_path / "models.json").write_text('{"providers": {"proxy": {"apiKey": "TEAM_PROXY_SECRET"}}}')
    env = {"ANTHROPIC_API_KEY": "a", "ANTHROPIC_OAUTH_TOKEN": "t", "OPENAI_API_KEY": "o", "GEMINI_API_KEY": "g",
           "GITHUB_TOKEN": "h", "TEAM_PROXY_SECRET": "p", "AWS_SECRET_ACCESS_KEY": "w"}
    record = RunRecord(run_id="r", resolved_model="anthropic/claude-sonnet-4-5", fallback_models=["google/gemini-2.5"])
    assert pi.keys(record, env) == ["ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "GEMINI_API_KEY"]
    assert pi.keys(RunRecord(run_id="r", resolved_model="proxy/big"), env) == ["TEAM_PROXY_SECRET"]
    assert pi.keys(RunRecord(run_id="r", resolved_model="amazon-bedrock/nova"), env) == ["AWS_SECRET_ACCESS_KEY"]
    assert pi.keys(RunRecord(run_id="r"), env) == list(env)  # pi's default provider, which nothing names
    (tmp_path / "settings.json").write_text('{"defaultProvider": "openai"}')
    assert pi.keys(RunRecord(run_id="r"), env) == ["OPENAI_API_KEY"]
