"""A real JupyterLab on 127.0.0.1 and a headless Chromium, for browser tests (see shared/notes/jupyter-testing.md).

The server runs in its own process session with its config, runtime, data, settings and workspace
dirs in a temp folder, so stopping it kills only what it started and the machine's Jupyter set-up
is neither read nor changed. The browser is the system Chromium (``/usr/bin/chromium``), launched
with the flags that keep it off the network.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"  # screenshots, kept for a look
LABEXTENSION = Path(__file__).resolve().parents[1] / "labextension" / "dist"  # nbsubagents' JupyterLab extension, built
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterLab:
    """``with JupyterLab(root, state_dir) as lab: page.goto(lab.url("lab/tree/x.ipynb"))``."""

    def __init__(self, root: Path, state_dir: Path, *, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.state = state_dir
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.extra_env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = state_dir / "jupyterlab.log"

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> JupyterLab:
        dirs = {name: self.state / name for name in ("config", "runtime", "data", "settings", "workspaces", "ipython",
                                                     "path")}
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        # nbsubagents' JupyterLab extension, of this checkout whatever the install: its server side (nbsubagents.lab,
        # imported from the tests' PYTHONPATH) and its labextension (found first in JUPYTER_PATH)
        (dirs["config"] / "jupyter_server_config.json").write_text(
            json.dumps({"ServerApp": {"jpserver_extensions": {"nbsubagents.lab": True}}}))
        (dirs["path"] / "labextensions").mkdir(exist_ok=True)
        link = dirs["path"] / "labextensions" / "nbsubagents"
        if not link.is_symlink():
            link.symlink_to(LABEXTENSION, target_is_directory=True)
        toast = dirs["settings"] / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        toast.parent.mkdir(parents=True, exist_ok=True)
        toast.write_text(json.dumps({"fetchNews": "false"}))
        env = {**os.environ, "JUPYTER_CONFIG_DIR": str(dirs["config"]), "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
               "JUPYTER_DATA_DIR": str(dirs["data"]), "IPYTHONDIR": str(dirs["ipython"]),
               "JUPYTER_PLATFORM_DIRS": "1", "JUPYTER_PATH": str(dirs["path"]), **self.extra_env}
        argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
                f"--port={self.port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root}", f"--LabApp.workspaces_dir={dirs['workspaces']}",
                f"--LabApp.user_settings_dir={dirs['settings']}", "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.expose_app_in_browser=True"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if self.api("GET", "api/status") is not None:
                    return self
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f"JupyterLab did not answer within {timeout}s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Shut the kernels down through the API, then end the server's process group."""
        if self.proc is None:
            return
        try:
            for kernel in self.api("GET", "api/kernels") or []:
                self.api("DELETE", f"api/kernels/{kernel['id']}")
        except (OSError, urllib.error.URLError, ValueError):
            pass
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc = None

    def __enter__(self) -> JupyterLab:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- helpers --------------------------------------------------------------------------------------
    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path}{sep}token={self.token}"

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(self.url(path), method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else {}

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def launch_chromium(playwright: Any) -> Any:
    """Chromium with its temp files in /tmp: its singleton socket's path must stay under the 107 bytes a Unix
    socket allows, which a test's TMPDIR under pytest-xdist's per-worker temp folder (``popen-gw0/``) exceeds."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                      env={**os.environ, "TMPDIR": "/tmp"})


def open_offline(browser: Any, page_file: Path, *, allow: Any = None) -> tuple[Any, list[str], list[str]]:
    """``page_file`` opened in a new 1200x1400 context with no network: a request ``allow(url)`` refuses (default:
    anything but a file) is aborted and listed. Returns the page, the blocked URLs and the page errors."""
    context = browser.new_context(viewport={"width": 1200, "height": 1400})
    blocked: list[str] = []
    allowed = allow or (lambda url: url.startswith("file://"))

    def offline(route: Any) -> None:
        if allowed(route.request.url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", offline)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri())
    return page, blocked, errors


KERNEL_IDLE = ("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
               " && window.jupyterapp.shell.currentWidget.sessionContext?.session?.kernel?.status === 'idle'")


# Colours as the page paints them: a colour's WCAG relative luminance, and the background behind an element (each
# background up its ancestors, the translucent ones laid over the next, with the elements' opacity, over the canvas).
_PAINT = """
  const parse = (s) => {
    const m = s.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const lum = (rgb) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]);
  };
  const ratio = (x, y) => {
    const [a, b] = [lum(x), lum(y)];
    return Math.round((Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) * 100) / 100;
  };
  const mix = (top, under, a) => [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a));
  // the canvas: the body's background, else the root's, else white (a page that sets none)
  const opaque = (el) => { const c = parse(getComputedStyle(el).backgroundColor); return c && c[3] > 0 ? c : null; };
  const page = opaque(document.body) || opaque(document.documentElement) || [255, 255, 255, 1];
  const opacity = (el, stop) => {
    let o = 1;
    for (let e = el; e && e !== stop; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity);
    return o;
  };
  const background = (el) => {
    const layers = [];
    for (let e = el; e && e !== document.body; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (!c || c[3] === 0) continue;
      const alpha = c[3] * opacity(e, document.body);
      layers.push([c, alpha]);
      if (alpha >= 1) break;
    }
    return layers.reverse().reduce((under, [c, alpha]) => mix(c, under, alpha), page);
  };
"""

# Contrast of every text node under the elements ``selector`` finds: its colour (with every ancestor's opacity) over
# the background behind it; ``kind``: the data-kind of the output it is in.
CONTRASTS = """(selector) => {""" + _PAINT + """
  const seen = [];
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const el = node.parentElement;
      if (!node.textContent.trim() || !el.getClientRects().length) continue;
      const style = getComputedStyle(el);
      if (style.visibility === 'hidden' || el.closest('style')) continue;
      const fg = parse(style.color), bg = background(el);
      seen.push({text: node.textContent.trim().slice(0, 50), ratio: ratio(mix(fg, bg, fg[3] * opacity(el, null)), bg),
                 color: style.color, cls: String(el.className), kind: el.closest('[data-kind]')?.dataset.kind});
    }
  }
  return seen;
}"""

# Every focusable control under the elements ``selector`` finds, focused (after a key press: :focus-visible): the
# contrast of its outline against the background around it (1 where it has none).
FOCUS_RINGS = """(selector) => {""" + _PAINT + """
  const seen = [];
  const controls = 'a[href], summary, button, input, textarea, select, [tabindex]:not([tabindex="-1"])';
  for (const root of document.querySelectorAll(selector)) {
    for (const el of root.querySelectorAll(controls)) {
      if (!el.getClientRects().length || el.disabled) continue;
      el.focus();
      if (document.activeElement !== el) continue;
      const s = getComputedStyle(el);
      const ring = s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1 ? parse(s.outlineColor) : null;
      const bg = background(el.parentElement);
      seen.push({text: (el.innerText || el.value || el.tagName).trim().slice(0, 40),
                 ratio: ring ? ratio(mix(ring, bg, ring[3]), bg) : 1,
                 outline: `${s.outlineStyle} ${s.outlineWidth} ${s.outlineColor}`, cls: String(el.className),
                 kind: el.closest('[data-kind]')?.dataset.kind});
      el.blur();
    }
  }
  return seen;
}"""

@dataclass
class LabPage:
    """A notebook open in Chromium, with every request and page error it saw."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def run_all_cells(self) -> None:
        """Start every cell; not awaited, since the command resolves only when the last cell ends."""
        self.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

    def offsite(self) -> list[str]:
        """Requests that left 127.0.0.1 (data: and blob: URLs stay in the page)."""
        return sorted({url for url in self.requests
                       if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).hostname != "127.0.0.1"})


@contextmanager
def lab_page(lab: JupyterLab, notebook: str, *, height: int = 1600, timeout_ms: int = 120_000) -> Iterator[LabPage]:
    """Open ``notebook`` of ``lab`` in headless Chromium and wait for its kernel to be idle."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": height})
            session = LabPage(context.new_page())
            context.on("request", lambda request: session.requests.append(request.url))
            session.page.on("pageerror", lambda error: session.errors.append(str(error)))
            session.page.set_default_timeout(timeout_ms)
            session.page.goto(lab.url(f"lab/tree/{notebook}?reset"))
            session.page.wait_for_function(KERNEL_IDLE, timeout=180_000)
            yield session
        finally:
            browser.close()


def write_notebook(path: Path, cells: list[str]) -> None:
    """A python3 notebook of these code cells (and the screenshot folder the tests write to)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    ARTIFACTS.mkdir(exist_ok=True)


def panel(page: Any, name: str) -> Any:
    """The run panels whose header names ``name`` (run panels, not groups)."""
    return page.locator(".nbsubagents-panel").filter(has=page.locator(".nbsubagents-name", has_text=name))
