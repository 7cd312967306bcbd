"""What a package that adds a harness builds on: register a module in the entry point group
``nbsubagents.harnesses`` (the user guide's "Adding a harness").

``Harness`` lists what the module provides, ``Request`` is what its ``build`` is given and ``Session`` how a run
is talked to. ``Stream`` is the session of a harness that prints JSON lines; ``command``, ``left_out``,
``relocate``, ``models``, ``models_key`` and ``continues_by_id`` are the defaults such a harness can take;
``version_of`` asks a program its version. ``claude_code``, ``codex`` and ``pi`` are the built-in harnesses
(their ``Adapter`` reads their stream into the common events).
"""

from ._child.harnesses import Harness, Request, Session, claude_code, codex, pi, version_of
from ._child.harnesses.stream import Stream, command, continues_by_id, left_out, models, models_key, relocate

__all__ = ["Harness", "Request", "Session", "Stream", "claude_code", "codex", "command", "continues_by_id",
           "left_out", "models", "models_key", "pi", "relocate", "version_of"]
