"""Everything about pi itself: where it is and how to start it (``locate``), the models it offers (``models``),
the argv one run starts it with (``args``), and the model it can use offline: the scripted model (``scripted``, a
test double, not an AI) and its detached server (``offline``, which the ``offline`` setting sends runs to; neither
is imported here). Presets are read by ``args`` (duck-typed), never imported at run time: ``preset_files`` imports
this package, not the reverse."""

from __future__ import annotations

from .locate import PI_PACKAGE, PI_VERSION, TESTED_PI, PiNotFoundError, PiPackage, find_pi, pi_command, pi_package
from .models import ModelChoice, ModelError, available_models, choose_model

__all__ = ["PI_PACKAGE", "PI_VERSION", "TESTED_PI", "ModelChoice", "ModelError", "PiNotFoundError", "PiPackage",
           "available_models", "choose_model", "find_pi", "pi_command", "pi_package"]
