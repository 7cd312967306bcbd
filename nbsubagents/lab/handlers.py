"""The server extension's JSON endpoints, under ``<base_url>/nbsubagents/``; authenticated like every Jupyter API.

- ``GET runs?path=NOTEBOOK``: the active runs of the notebook's project (``readers.running``);
- ``GET record?path=NOTEBOOK&run_id=ID[&run_id=ID...][&group=1]``: a run's or a group's record as of now
  (``readers.current_record``).

``path`` is relative to the server's root, as Jupyter names files ("" or left out: the root's project). The reads
run in a worker thread: a long run's events, rendered once it ended, never hold up the server's other requests.
"""

from __future__ import annotations

import asyncio
import json

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .._config import NbSubagentsError
from . import readers


class _ProjectHandler(APIHandler):
    def project(self):
        try:
            return readers.project_of(self.settings["server_root_dir"], self.get_argument("path", ""))
        except NbSubagentsError as exc:
            raise web.HTTPError(400, str(exc)) from None


class RunsHandler(_ProjectHandler):
    @web.authenticated
    async def get(self) -> None:
        self.finish(json.dumps(await asyncio.to_thread(readers.running, self.project())))


class RecordHandler(_ProjectHandler):
    @web.authenticated
    async def get(self) -> None:
        project = self.project()
        try:
            answer = await asyncio.to_thread(readers.current_record, project, self.get_arguments("run_id"),
                                             group=self.get_argument("group", "") in ("1", "true"))
        except NbSubagentsError as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.finish(json.dumps(answer))


def setup_handlers(web_app) -> None:
    base = url_path_join(web_app.settings["base_url"], "nbsubagents")
    web_app.add_handlers(".*$", [(url_path_join(base, "runs"), RunsHandler),
                                 (url_path_join(base, "record"), RecordHandler)])
