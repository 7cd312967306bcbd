"""nbsubagents in JupyterLab: a Jupyter Server extension (``handlers``: JSON endpoints under ``/nbsubagents/``, read by
``readers``) for the labextension built from ``labextension/`` (its running runs in JupyterLab's status bar, and saved
records of runs whose kernel went away brought up to date in the notebook), and a pre-save hook (``saving``) that keeps
the records of nbsubagents' outputs in a saved notebook, never their widget views.

Enabled by ``etc/jupyter/jupyter_server_config.d/nbsubagents.json``, which the wheel installs. ``import nbsubagents``
never imports this package (it needs jupyter_server and tornado).
"""

from __future__ import annotations

from typing import Any

from .handlers import setup_handlers
from .saving import records_not_views


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "nbsubagents.lab"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    setup_handlers(server_app.web_app)
    server_app.contents_manager.register_pre_save_hook(records_not_views)  # a saved notebook keeps records, not views
    server_app.log.info("nbsubagents: /nbsubagents/runs and /nbsubagents/record ready")
