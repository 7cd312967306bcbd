"""The server extension's JSON endpoints, under ``<base_url>/nbsubagents/``; authenticated like every Jupyter API.

- ``GET runs?path=NOTEBOOK[&kernel=ID]``: the active runs of the notebook's projects (``readers.running``);
- ``GET record?path=NOTEBOOK[&kernel=ID]&run_id=ID[&run_id=ID...][&group=1]``: a run's or a group's record as of
  now (``readers.current_record``);
- ``GET bar?path=NOTEBOOK[&kernel=ID]``: the notebook's ``status_bar()`` record as of now (``readers.current_bar``).

A notebook's projects: the project its kernel works in now (the kernel's working folder, read from
``/proc/<pid>/cwd``: a notebook that ``os.chdir``-s into a project anywhere on the machine has that project's runs),
then the projects its kernels worked in before (remembered per notebook while the server runs: a record whose
kernel died finds its runs), then the project of the notebook's own path (``path`` relative to the server's root, as
Jupyter names files; "" or left out: the root's project). The reads run in a worker thread: a long run's events,
rendered once it ended, never hold up the server's other requests.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .._config import NbSubagentsError
from . import readers

REMEMBERED = 4  # projects a notebook's kernels worked in that are remembered, the latest first
_USED = "nbsubagents_projects"  # the server's settings key: notebook path -> the projects its kernels used


class _ProjectHandler(APIHandler):
    def projects(self) -> list[Path]:
        path = self.get_argument("path", "")
        try:
            own = readers.project_of(self.settings["server_root_dir"], path)
        except NbSubagentsError as exc:
            raise web.HTTPError(400, str(exc)) from None
        used: dict[str, list[Path]] = self.settings.setdefault(_USED, {})
        found = self._kernel_project()
        if found is not None:
            used[path] = [found, *(p for p in used.get(path, []) if p != found)][:REMEMBERED]
        return list(dict.fromkeys([*used.get(path, []), own]))

    def _kernel_project(self) -> Path | None:
        """The project the kernel ``kernel`` (one of this server's) works in now, if it has a registry."""
        kernel_id = self.get_argument("kernel", "")
        if not kernel_id or kernel_id not in self.kernel_manager:
            return None
        pid = getattr(getattr(self.kernel_manager.get_kernel(kernel_id), "provisioner", None), "pid", None)
        if not isinstance(pid, int):
            return None  # a kernel elsewhere (a gateway, a remote provisioner): its notebook's path tells
        try:
            folder = os.readlink(f"/proc/{pid}/cwd")
        except OSError:  # not Linux, or the kernel is gone
            return None
        return readers.project_at(folder)


class RunsHandler(_ProjectHandler):
    @web.authenticated
    async def get(self) -> None:
        answer = await asyncio.to_thread(readers.running, *self.projects())
        root = Path(self.settings["server_root_dir"]).expanduser().resolve()
        for sweep in answer["sweeps"]:  # the notebook that started it, as Jupyter names files ("": not in the root)
            sweep["notebook"] = _in_root(root, sweep["notebook"])
        self.finish(json.dumps(answer))


def _in_root(root: Path, notebook: str) -> str:
    path = (root / notebook).resolve() if notebook else root
    return path.relative_to(root).as_posix() if root in path.parents and path.is_file() else ""


class RecordHandler(_ProjectHandler):
    @web.authenticated
    async def get(self) -> None:
        projects = self.projects()
        try:
            answer = await asyncio.to_thread(readers.current_record, projects, self.get_arguments("run_id"),
                                             group=self.get_argument("group", "") in ("1", "true"))
        except NbSubagentsError as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.finish(json.dumps(answer))


class BarHandler(_ProjectHandler):
    @web.authenticated
    async def get(self) -> None:
        self.finish(json.dumps(await asyncio.to_thread(readers.current_bar, self.projects())))


def setup_handlers(web_app) -> None:
    base = url_path_join(web_app.settings["base_url"], "nbsubagents")
    web_app.add_handlers(".*$", [(url_path_join(base, "runs"), RunsHandler),
                                 (url_path_join(base, "record"), RecordHandler),
                                 (url_path_join(base, "bar"), BarHandler)])
