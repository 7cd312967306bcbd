"""Secrets masked wherever a run's text travels (control characters are ``text``'s).

The one masking of the package (reports, static panel records, ``browse()``, the CLI, MLflow exports). Standard
library only, so every band can use it. A ``Masker`` replaces with ``MASK``:

- the values of environment variables whose names hold ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``/``PASSWD`` or
  ``CREDENTIAL`` (at least ``MIN_ENV_SECRET`` characters; a value that is an existing path is not a secret), and
  the ``apiKey`` (and token) values of pi's ``models.json`` and ``auth.json`` — also in their HTML- and
  JSON-escaped forms, their base64 (at any alignment, so inside a longer encoded text such as ``NAME=value``'s) and
  hex forms, and a start of one (at least ``MIN_PREFIX`` characters) that a truncation cut short
  (``sk-test-SUPERSECR…``); with ``pieces``, also a word that is a start of one (at least ``MIN_PREFIX``
  characters) or any piece of one (at least ``MIN_PIECE``): a key the model split across calls or deltas;
- common key shapes (``KEY_SHAPES``: ``sk-…``, ``ghp_…``, ``xoxb-…``, ``AKIA…``, ``Bearer …``, JWTs, private key
  blocks, ``SOME_TOKEN=value``);
- the user's own regular expressions (the ``secret_patterns`` setting): a pattern with a group named ``secret``
  masks that group, else the whole match.

Mask before cutting text short: ``Masker.data`` masks every string of a JSON-like value (events, meta, result).
``needed_only`` leaves a child only the secret-named variables its harness needs.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["MASK", "KEY_SHAPES", "Masker", "secret_values", "needed_only", "compile_patterns"]

MASK = "••••••"
MIN_ENV_SECRET = 8       # shorter values of secret-named variables are not masked (they would mask ordinary words)
MIN_CONFIG_SECRET = 6    # a key pi's config names as one
MIN_PREFIX = 8           # the shortest start of a secret, cut short by a truncation, that is still masked
MIN_PIECE = 10           # the shortest piece of a secret, streamed in parts (pi's deltas), that ``pieces`` masks
MIN_ENCODED = 12         # the shortest base64 run of a secret masked (its edges, shared with its neighbours, dropped)
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW(?:OR)?D|CREDENTIAL", re.IGNORECASE)
CONFIG_KEYS = {"apikey", "api_key", "key", "token", "access", "refresh", "accesstoken", "refreshtoken"}
ELLIPSES = ("…", "...", "&hellip;")

_B = r"(?<![A-Za-z0-9_-])"  # a key shape starts a word
_WORD_SHAPES = (
    r"sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}",          # OpenAI, Anthropic (sk-ant-...), sk-proj-...
    r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{12,}",           # Stripe
    r"gh[pousr]_[A-Za-z0-9]{20,}",                            # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"glpat-[A-Za-z0-9_-]{16,}",                              # GitLab
    r"xox[abposr]-[A-Za-z0-9-]{10,}",                         # Slack
    r"(?:AKIA|ASIA)[A-Z0-9]{12,}",                            # AWS access key ids
    r"AIza[0-9A-Za-z_-]{20,}",                                # Google API keys
    r"hf_[A-Za-z0-9]{20,}",                                   # Hugging Face
    r"npm_[A-Za-z0-9]{20,}",                                  # npm
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",  # JWTs
)
KEY_SHAPES: tuple[str, ...] = (
    _B + "(?:" + "|".join(_WORD_SHAPES) + ")",  # one pass for every word-like shape
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
    r"(?<![A-Za-z])[Bb]earer\s+(?P<secret>(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,})",
    # NAME=value where NAME is an environment-style name ending in KEY, TOKEN, SECRET or PASSWORD
    r"\b[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)\b[\"']?\s*[=:]\s*[\"']?(?P<secret>[^\s\"'&<>]{8,})",
)


def compile_patterns(patterns: Iterable[str], where: str = "secret_patterns") -> list[re.Pattern[str]]:
    """The user's patterns compiled; a pattern that is not a string or not a regular expression raises
    ``ValueError`` naming it and ``where`` it came from."""
    compiled = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{where} must be a list of regular expressions (strings), got {pattern!r} in it")
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError(f"{where}: {pattern!r} is not a regular expression ({exc}); escape a literal "
                             f"value with re.escape(...)") from None
    return compiled


def _is_path(value: str) -> bool:
    return value[:1] in ("/", "~") and os.path.exists(os.path.expanduser(value))


def secret_values(env: Mapping[str, str] | None = None, agent: Path | None = None) -> list[str]:
    """The values to mask, longest first: secret-named environment variables and the keys in pi's config
    files under ``agent`` (pi's agent dir)."""
    env = dict(os.environ) if env is None else env
    found = {value for name, value in env.items()
             if value and SECRET_NAME.search(name) and len(value) >= MIN_ENV_SECRET and not _is_path(value)}
    if agent is not None:
        for name in ("models.json", "auth.json"):
            try:
                data = json.loads((agent / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            for value in _config_secrets(data):
                if value.startswith("!"):
                    continue  # a shell command that prints the key, not the key
                if re.fullmatch(r"[A-Z][A-Z0-9_]*", value):
                    value = env.get(value, "")  # the name of the variable holding the key
                if len(value) >= MIN_CONFIG_SECRET:
                    found.add(value)
    return sorted(found, key=lambda v: (-len(v), v))


def needed_only(env: Mapping[str, str], needed: Iterable[str], given: Iterable[str] = ()) -> dict[str, str]:
    """``env`` without the secret-named variables (``SECRET_NAME``) a child does not need: those in ``needed`` (its
    provider's keys) and ``given`` (what nbsubagents gives the run, such as the offline model's dummy key) stay."""
    keep = set(needed) | set(given)
    return {name: value for name, value in env.items() if name in keep or not SECRET_NAME.search(name)}


def _encoded(secret: str) -> set[str]:
    """The hex and base64 forms of ``secret``: in base64 at each of the three alignments a longer text may give it
    (the characters it shares with its neighbours dropped), so it is found inside any encoded text."""
    raw = secret.encode("utf-8", "surrogatepass")
    out = {raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode()}
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        inner = encoded[-(-4 * shift // 3):(len(raw) + shift) // 3 * 4]
        if len(inner) >= MIN_ENCODED:
            out.add(inner)
    return out | {form.replace("+", "-").replace("/", "_") for form in out}  # the URL-safe alphabet too


def _config_secrets(data: Any) -> Iterable[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str) and key.lower() in CONFIG_KEYS:
                yield value
            else:
                yield from _config_secrets(value)
    elif isinstance(data, list):
        for item in data:
            yield from _config_secrets(item)


class Masker:
    """Masks these ``secrets`` (literal values), the key shapes and the extra ``patterns``."""

    def __init__(self, secrets: Sequence[str] = (), patterns: Iterable[str | re.Pattern[str]] = ()) -> None:
        self.secrets = [s for s in secrets if s]
        forms: set[str] = set()
        for secret in self.secrets:
            forms.update({secret, html.escape(secret), html.escape(secret, quote=False), json.dumps(secret)[1:-1],
                          json.dumps(secret, ensure_ascii=False)[1:-1], *_encoded(secret)})
        self._forms = sorted((f for f in forms if f), key=len, reverse=True)
        self._literal = (re.compile("|".join(re.escape(f) for f in self._forms)) if self._forms else None)
        self._patterns = [re.compile(p) if isinstance(p, str) else p for p in KEY_SHAPES] + \
            [re.compile(p) if isinstance(p, str) else p for p in patterns]

    def text(self, text: str, *, pieces: bool = False) -> str:
        """``text`` with every secret replaced by ``MASK``. ``pieces``: also a word that is a start of a known
        secret (at least ``MIN_PREFIX`` characters) or a piece of one (at least ``MIN_PIECE``), as a stream of
        deltas, or a model writing a key in parts, splits one (what a run writes, for exports)."""
        if not text or not isinstance(text, str):
            return text
        if self._literal is not None:
            text = self._literal.sub(MASK, text)
            if any(e in text for e in ELLIPSES):
                text = self._cut_short(text)
            if pieces:
                text = self._pieces(text)
        for pattern in self._patterns:
            text = pattern.sub(_replace, text)
        return text

    __call__ = text

    def _cut_short(self, text: str) -> str:
        """A start of a secret (at least ``MIN_PREFIX`` characters) right before an ellipsis: a truncation cut
        it short."""
        spans: list[tuple[int, int]] = []
        for ellipsis in ELLIPSES:
            at = text.find(ellipsis)
            while at >= 0:
                for form in self._forms:
                    if len(form) <= MIN_PREFIX:
                        continue
                    window = text[max(0, at - len(form) + 1):at]
                    start = window.find(form[:MIN_PREFIX])
                    while start >= 0:
                        if form.startswith(window[start:]):
                            spans.append((at - (len(window) - start), at))
                            break
                        start = window.find(form[:MIN_PREFIX], start + 1)
                    else:
                        continue
                    break
                at = text.find(ellipsis, at + 1)
        for begin, end in sorted(spans, reverse=True):
            text = text[:begin] + MASK + text[end:]
        return text

    def _pieces(self, text: str) -> str:
        secrets = [s for s in self.secrets if len(s) > MIN_PREFIX]
        if not secrets:
            return text

        def piece(match: re.Match[str]) -> str:
            word = match.group(0)
            for secret in secrets:
                if secret.startswith(word) or len(word) >= MIN_PIECE and word in secret:
                    return MASK
                head, tail = secret[:MIN_PIECE], secret[-MIN_PIECE:]
                at = word.find(head)  # the word ends with a start of the secret
                while at >= 0:
                    if secret.startswith(word[at:]):
                        return word[:at] + MASK
                    at = word.find(head, at + 1)
                at = word.rfind(tail)  # the word starts with an end of the secret
                while at >= 0:
                    if secret.endswith(word[:at + MIN_PIECE]):
                        return MASK + word[at + MIN_PIECE:]
                    at = word.rfind(tail, 0, at + MIN_PIECE - 1)
            return word

        return _WORD.sub(piece, text)

    def data(self, value: Any, *, pieces: bool = False) -> Any:
        """A copy of a JSON-like value (dicts, lists, strings) with every string masked (keys too)."""
        if isinstance(value, str):
            return self.text(value, pieces=pieces)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.data(v, pieces=pieces) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.data(v, pieces=pieces) for v in value)
        return value


_WORD = re.compile(r"[^\s\"'\\`<>&|,;:(){}\[\]]{%d,}" % MIN_PREFIX)


def _replace(match: re.Match[str]) -> str:
    if "secret" in match.re.groupindex and match.group("secret") is not None:
        start, end = match.span("secret")
        base = match.start()
        whole = match.group(0)
        return whole[:start - base] + MASK + whole[end - base:]
    return MASK
