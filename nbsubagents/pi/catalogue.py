"""pi's model list read from the files pi reads, without starting pi (the rules of pi 0.73.1 and 1.3.0).

``pi --list-models`` prints the models of pi's built-in catalogue (pi-ai's ``models.generated.js``) and of the
agent dir's ``models.json`` whose provider has credentials: an ``auth.json`` entry, a provider key variable, or
an ``apiKey`` in ``models.json``. :func:`read_available` reproduces that answer for the pi versions whose code it
was read from (``VERIFIED``; what differs between them is data in ``_RULES``), and returns None (ask pi) whenever
it could differ: another pi version, an extension (it may register providers), OAuth credentials (their provider
may rewrite its models), a ``models.json`` or ``auth.json`` it does not fully understand. pi 1.x lists a
configured built-in provider's models from per-provider data, a remote-catalogue cache (``models-store.json``)
and credential-dependent filters, so for it the answer is given only when no built-in provider can be
configured (no ``auth.json`` entry, no variable or file a built-in provider's credentials come from): then the
list is the ``models.json`` providers' alone. tests/e2e/test_catalogue.py compares it with the real
``pi --list-models`` of both pinned versions in each case it answers.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .locate import PiPackage

# pi-ai 0.73.1's env-api-keys.js: the variables whose being set configures a provider (first wins, any counts).
_ENV_KEYS: dict[str, tuple[str, ...]] = {
    "github-copilot": ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
    "anthropic": ("ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"),
    "openai": ("OPENAI_API_KEY",), "azure-openai-responses": ("AZURE_OPENAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",), "google": ("GEMINI_API_KEY",), "google-vertex": ("GOOGLE_CLOUD_API_KEY",),
    "groq": ("GROQ_API_KEY",), "cerebras": ("CEREBRAS_API_KEY",), "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",), "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",), "zai": ("ZAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",), "minimax": ("MINIMAX_API_KEY",), "minimax-cn": ("MINIMAX_CN_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",), "moonshotai-cn": ("MOONSHOT_API_KEY",), "huggingface": ("HF_TOKEN",),
    "fireworks": ("FIREWORKS_API_KEY",), "opencode": ("OPENCODE_API_KEY",), "opencode-go": ("OPENCODE_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",), "cloudflare-workers-ai": ("CLOUDFLARE_API_KEY",),
    "cloudflare-ai-gateway": ("CLOUDFLARE_API_KEY",), "xiaomi": ("XIAOMI_API_KEY",),
    "xiaomi-token-plan-cn": ("XIAOMI_TOKEN_PLAN_CN_API_KEY",),
    "xiaomi-token-plan-ams": ("XIAOMI_TOKEN_PLAN_AMS_API_KEY",),
    "xiaomi-token-plan-sgp": ("XIAOMI_TOKEN_PLAN_SGP_API_KEY",),
}
_BEDROCK_KEYS = ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE")


# pi-ai 1.3.0: every variable a built-in provider's credentials come from (env-api-keys.js, providers/*.js, the
# built-in llama.cpp extension's LLAMA_BASE_URL); while any is set, or Google's application-default credentials
# file exists, a built-in provider may be configured and pi is asked.
_AMBIENT_1_3 = (
    "AI_GATEWAY_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_FEDERATION_RULE_ID",
    "ANTHROPIC_IDENTITY_TOKEN_FILE", "ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_ORGANIZATION_ID",
    "ANTHROPIC_SERVICE_ACCOUNT_ID", "ANTHROPIC_WORKSPACE_ID", "ANT_LING_API_KEY", "AWS_ACCESS_KEY_ID",
    "AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_PROFILE", "AWS_SECRET_ACCESS_KEY", "AWS_WEB_IDENTITY_TOKEN_FILE", "AZURE_OPENAI_API_KEY", "BASETEN_API_KEY",
    "CEREBRAS_API_KEY", "CLOUDFLARE_ACCOUNT_ID", "CLOUDFLARE_API_KEY", "CLOUDFLARE_GATEWAY_ID",
    "COPILOT_GITHUB_TOKEN", "DEEPSEEK_API_KEY", "FIREWORKS_API_KEY", "GCLOUD_PROJECT", "GEMINI_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_API_KEY", "GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_PROJECT",
    "GROQ_API_KEY", "HF_TOKEN", "KIMI_API_KEY", "LLAMA_API_KEY", "LLAMA_BASE_URL", "META_API_KEY",
    "MINIMAX_API_KEY", "MINIMAX_CN_API_KEY", "MISTRAL_API_KEY", "MOONSHOT_API_KEY", "NVIDIA_API_KEY",
    "OPENAI_API_KEY", "OPENCODE_API_KEY", "OPENROUTER_API_KEY", "QWEN_TOKEN_PLAN_API_KEY",
    "QWEN_TOKEN_PLAN_CN_API_KEY", "RADIUS_API_KEY", "TOGETHER_API_KEY", "TYPESAFE_API_KEY", "XAI_API_KEY",
    "XIAOMI_API_KEY", "XIAOMI_TOKEN_PLAN_AMS_API_KEY", "XIAOMI_TOKEN_PLAN_CN_API_KEY",
    "XIAOMI_TOKEN_PLAN_SGP_API_KEY", "ZAI_API_KEY", "ZAI_CODING_CN_API_KEY")

# models.generated.js: 0.73.1 lists every model with its provider; 1.3.0 maps each provider to a module of its
# own (``"openai": OPENAI_MODELS,`` in ``export const MODELS``), whose models this module does not read.
_MODEL_PAIRS = re.compile(r'\n {12}(id|provider): "([^"\\]*)",(?=\n)')
_PROVIDER_MODULES = re.compile(r'\n {4}"([^"\\]+)": [A-Z0-9_]+_MODELS,(?=\n)')


@dataclass(frozen=True)
class _Rules:
    """What one pi version does differently; the logic reading the files is the same for all."""

    lists_builtins: bool          # its built-in models are read (else: answered only while none is configured)
    env_keys: dict[str, tuple[str, ...]]     # provider -> variables that configure it (lists_builtins)
    ambient: tuple[str, ...]      # variables that may configure a built-in provider (not lists_builtins)
    extra_providers: tuple[str, ...] = ()    # built-in providers outside the catalogue (built-in extensions)
    api_key_templates: bool = False  # a models.json apiKey with "$" is a template of variables: left to pi


_RULES: dict[tuple[str, str], _Rules] = {
    ("@mariozechner/pi-coding-agent", "0.73.1"): _Rules(lists_builtins=True, env_keys=_ENV_KEYS, ambient=()),
    ("@earendil-works/pi-coding-agent", "1.3.0"): _Rules(lists_builtins=False, env_keys={}, ambient=_AMBIENT_1_3,
                                                         extra_providers=("llama.cpp",), api_key_templates=True),
}
# (package, version) whose ModelRegistry.getAvailable() / ModelRuntime.getAvailable() this module reproduces.
VERIFIED = tuple(_RULES)

# models.json as pi 0.73.1's schema has it (pi 1.3.0's accepts all of it, with the same meaning, and more); a file
# using anything else (modelOverrides, routing, 1.3.0's oauth or samplingParams) is left to pi.
_TEXT = "text"
_PROVIDER_FIELDS = {"name": _TEXT, "baseUrl": _TEXT, "apiKey": _TEXT, "api": _TEXT, "headers": "headers",
                    "compat": "compat", "authHeader": bool, "models": "models"}
_MODEL_FIELDS = {"id": _TEXT, "name": _TEXT, "api": _TEXT, "baseUrl": _TEXT, "reasoning": bool,
                 "thinkingLevelMap": "levels", "input": "input", "cost": "cost", "contextWindow": "number",
                 "maxTokens": "number", "headers": "headers", "compat": "compat"}
_COMPAT_BOOLS = {"supportsStore", "supportsDeveloperRole", "supportsReasoningEffort", "supportsUsageInStreaming",
                 "requiresToolResultName", "requiresAssistantAfterToolResult", "requiresThinkingAsText",
                 "requiresReasoningContentOnAssistantMessages", "supportsStrictMode", "supportsLongCacheRetention",
                 "sendSessionIdHeader", "supportsEagerToolInputStreaming"}
_COMPAT_CHOICES = {"maxTokensField": {"max_completion_tokens", "max_tokens"},
                   "thinkingFormat": {"openai", "openrouter", "deepseek", "zai", "qwen", "qwen-chat-template"},
                   "cacheControlFormat": {"anthropic"}}
_LEVELS = {"off", "minimal", "low", "medium", "high", "xhigh"}


def _generated_catalogue(package: PiPackage) -> str | None:
    scope = package.name.split("/")[0]
    for ai in (package.path.parent.parent / "pi-ai", package.path.parent / "node_modules" / scope / "pi-ai"):
        try:
            return (ai / "dist" / "models.generated.js").read_text(encoding="utf-8")
        except OSError:
            continue
    return None


def builtin_models(package: PiPackage) -> list[tuple[str, str]] | None:
    """``(provider, id)`` of every model in pi-ai's generated catalogue (pi 0.73.1), in its order; None if not
    found. A value with an escape does not match, so its model's pair is incomplete and the answer is None."""
    fields = _MODEL_PAIRS.findall(_generated_catalogue(package) or "")
    pairs = list(zip(fields[::2], fields[1::2]))
    if not pairs or len(fields) % 2 or any(i[0] != "id" or p[0] != "provider" for i, p in pairs):
        return None
    return [(p[1], i[1]) for i, p in pairs]


def builtin_providers(package: PiPackage) -> set[str] | None:
    """The providers of pi-ai's generated catalogue when it names one module per provider (pi 1.x)."""
    text = _generated_catalogue(package) or ""
    start = text.find("\nexport const MODELS = {")
    block = text[start:text.find("\n};", start) + 1] if start >= 0 else ""
    return set(_PROVIDER_MODULES.findall(block)) or None


def _strip_json_comments(text: str) -> str:
    """pi's stripJsonComments: ``//`` line comments and trailing commas go, string literals stay."""
    text = re.sub(r'"(?:\\.|[^"\\])*"|//[^\n]*', lambda m: m[0] if m[0][0] == '"' else "", text)
    return re.sub(r'"(?:\\.|[^"\\])*"|,(\s*[}\]])', lambda m: m[1] if m[1] is not None else m[0], text)


def _valid(value: Any, kind: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind == _TEXT:
        return isinstance(value, str) and len(value) >= 1
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "headers":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if kind == "input":
        return isinstance(value, list) and all(v in ("text", "image") for v in value)
    if kind == "levels":
        return isinstance(value, dict) and all(k in _LEVELS and (v is None or isinstance(v, str))
                                               for k, v in value.items())
    if kind == "cost":
        return (isinstance(value, dict) and set(value) == {"input", "output", "cacheRead", "cacheWrite"}
                and all(_valid(v, "number") for v in value.values()))
    if kind == "compat":
        return isinstance(value, dict) and all(
            (k in _COMPAT_BOOLS and isinstance(v, bool)) or (k in _COMPAT_CHOICES and v in _COMPAT_CHOICES[k])
            for k, v in value.items())
    if kind == "models":
        return isinstance(value, list) and all(
            isinstance(m, dict) and "id" in m and set(m) <= set(_MODEL_FIELDS)
            and all(_valid(v, _MODEL_FIELDS[k]) for k, v in m.items()) for m in value)
    return False


def _custom_models(path: Path, builtin_providers: set[str],
                   rules: _Rules) -> tuple[list[tuple[str, str]], set[str]] | None:
    """The models a valid models.json adds, and the providers it gives an apiKey; None when pi may judge otherwise."""
    try:
        config = json.loads(_strip_json_comments(path.read_text(encoding="utf-8")), parse_constant=_no_constant)
    except FileNotFoundError:
        return [], set()
    except (OSError, ValueError):
        return None
    providers = config.get("providers") if isinstance(config, dict) else None
    if not isinstance(providers, dict) or set(config) != {"providers"}:
        return None
    models, keyed = [], set()
    for name, provider in providers.items():
        if not (isinstance(provider, dict) and set(provider) <= set(_PROVIDER_FIELDS)
                and all(_valid(v, _PROVIDER_FIELDS[k]) for k, v in provider.items())):
            return None
        defs = provider.get("models") or []
        known = name in builtin_providers
        if known and not rules.lists_builtins:
            return None  # it would change or configure a built-in provider whose models are not read
        if rules.api_key_templates and "$" in provider.get("apiKey", ""):
            return None  # a template: configured only while its variables are set
        if not defs and not any(k in provider for k in ("baseUrl", "headers", "compat")):
            return None  # pi rejects the whole file
        if defs and not known and not (provider.get("baseUrl") and provider.get("apiKey")):
            return None
        for model in defs:
            if ("api" not in provider and "api" not in model and not known
                    or model.get("contextWindow", 1) <= 0 or model.get("maxTokens", 1) <= 0):
                return None
            if known or (model.get("api") or provider.get("api")) and (model.get("baseUrl") or provider.get("baseUrl")):
                models.append((name, model["id"]))
        if "apiKey" in provider:
            keyed.add(name)
    return models, keyed


def _env_configured(provider: str, rules: _Rules) -> bool:
    env = os.environ
    if any(env.get(name) for name in rules.env_keys.get(provider, ())):
        return True
    if provider == "google-vertex":
        return (_adc_file().exists() and bool(env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT"))
                and bool(env.get("GOOGLE_CLOUD_LOCATION")))
    if provider == "amazon-bedrock":
        return any(env.get(name) for name in _BEDROCK_KEYS) or bool(
            env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"))
    return False


def _adc_file() -> Path:
    """Google's application-default credentials file, where pi-ai looks for it."""
    adc = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    return Path(adc) if adc else Path.home() / ".config" / "gcloud" / "application_default_credentials.json"


def _truthy(value: Any) -> bool:
    """JavaScript's truthiness: an empty object or list counts."""
    return value is not None and value is not False and value != 0 and value != ""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's json reads NaN and Infinity, JavaScript's does not


def _json_object(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _settings(path: Path) -> dict | None:
    """A settings file as pi reads it: one it cannot parse (a missing one) counts as no setting."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else None


def _may_load_extensions(adir: Path, cwd: Path) -> bool:
    """Whether pi may load an extension (which may register providers): from the agent dir, the project's .pi, or
    a package or extension named in either one's settings.json."""
    for base in (adir, cwd / ".pi"):
        settings = _settings(base / "settings.json")
        if (base / "extensions").exists() or settings is None or settings.get("packages") or settings.get("extensions"):
            return True
    return False


# ICU's root collation (what JavaScript's localeCompare sorts pi's list by) puts punctuation in this order, then
# digits, then letters without regard to case; case only breaks ties (lower first).
_PUNCTUATION = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"


def _collation_key(text: str) -> tuple:
    def rank(c: str) -> int:
        if c in _PUNCTUATION:
            return _PUNCTUATION.index(c)
        return 100 + ord(c) if c.isdigit() else 1000 + ord(c.lower())
    return tuple(rank(c) for c in text), tuple(c.isupper() for c in text)


def read_available(package: PiPackage | None, adir: Path, cwd: Path | None = None) -> tuple[str, ...] | None:
    """What ``pi --list-models`` run in ``cwd`` would list, as ``provider/id`` in its order; None: ask pi."""
    rules = None if package is None else _RULES.get((package.name, package.version))
    if package is None or rules is None:
        return None
    auth = _json_object(adir / "auth.json")
    if auth is None or _may_load_extensions(adir, Path(cwd or Path.cwd())):
        return None
    if not (adir / "auth.json").exists() and ((adir / "oauth.json").exists()
                                              or (_settings(adir / "settings.json") or {}).get("apiKeys")):
        return None  # pi would first migrate these into auth.json
    if any(isinstance(c, dict) and c.get("type") == "oauth" for c in auth.values()):
        return None
    if rules.lists_builtins:
        builtin = builtin_models(package)
        names = None if builtin is None else {p for p, _ in builtin}
    else:
        if auth or any(name in os.environ for name in rules.ambient) or _adc_file().exists():
            return None  # a built-in provider may be configured, and its models are not read
        builtin, names = [], builtin_providers(package)
    custom = None if names is None else _custom_models(adir / "models.json", names | set(rules.extra_providers), rules)
    if builtin is None or custom is None:
        return None
    extra, keyed = custom
    merged = dict.fromkeys(builtin + extra)
    configured = {p for p in {p for p, _ in merged}
                  if _truthy(auth.get(p)) or p in keyed or _env_configured(p, rules)}
    available = [m for m in merged if m[0] in configured]
    available.sort(key=lambda m: (_collation_key(m[0]), _collation_key(m[1])))
    return tuple(f"{p}/{i}" for p, i in available)
