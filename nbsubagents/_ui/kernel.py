"""The kernel and its frontend, quarantined: every use of ipykernel's and ipywidgets' private APIs is here.

- which kernel we run in: ``kernel_shell()``, ``in_kernel()``, ``in_widget_kernel()``
  (IPython is never imported: only looked up when already loaded), and so where plain text goes
  (``text_stream()``); whether a person can answer there (``person_at_frontend()``: a cell run with stdin);
- whose cell a thread's output belongs to: ``cell_parent()`` and ``in_cell()`` (ipykernel's per-thread
  parent of its output streams), so the clock's prints reach the cell that launched a run;
- clicks served while a foreground cell keeps the main thread busy: ``click_subshell()`` (a kernel
  subshell, ipykernel >= 7.4, made through its shell channel's private manager), ``route_clicks()`` (a
  widget comm's private reply routing) and ``keep_widget_channel()`` (JupyterLab's widget subshell opened
  before a run's cell);
- ``load_ipywidgets()``: the import of ipywidgets, with the install hint when it is missing; in a widget kernel
  the first call readies the frontend (``keep_widget_channel``), so nothing of it happens at import;
- ``new_widget()`` and ``shared()``: a widget opened with its whole state in one comm message, and the layouts and
  styles that widgets share instead of opening two widgets of their own each;
- ``NotebookRecord``: an output that the saved notebook keeps true (a display id whose bundle is the view's
  static record, updated in place; the widget view rides along only while the view is interactive).

When ipykernel or ipywidgets change these internals, this is the one module to change; every function
degrades to "not available" (clicks then wait for the main shell) rather than raise.
"""

from __future__ import annotations

import atexit
import importlib.util
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["NotebookRecord", "end_live_records", "kernel_shell", "in_kernel", "in_widget_kernel",
           "person_at_frontend", "text_stream", "progress_stream",
           "cell_parent", "in_cell", "click_subshell", "route_clicks",
           "keep_widget_channel", "load_ipywidgets", "new_widget", "shared", "widget_view"]


def kernel_shell() -> Any:
    """The IPython shell of a Jupyter kernel we run in, else None (IPython is never imported here)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
    except Exception:
        return None
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def in_widget_kernel() -> bool:
    """True inside a Jupyter kernel (ipykernel's ZMQInteractiveShell) where ipywidgets is importable.

    Terminal IPython and plain scripts are not; a kernel run by nbconvert is (it keeps the widget
    state when asked to), so set ``NBSUBAGENTS_DISPLAY=text`` there for plain text.
    """
    shell = kernel_shell()
    if shell is None or not any(cls.__name__ == "ZMQInteractiveShell" for cls in type(shell).__mro__):
        return False
    return importlib.util.find_spec("ipywidgets") is not None


def in_kernel() -> bool:
    """True inside a Jupyter kernel (its stdout is the notebook's output), whatever the widgets."""
    return kernel_shell() is not None


def person_at_frontend() -> bool:
    """True in a kernel whose request now comes from a frontend a person uses: a cell run with stdin allowed
    (JupyterLab, Notebook, VS Code) or a widget's click. False outside a kernel and for a cell run by nbclient,
    papermill or nbconvert, which run cells with ``allow_stdin`` false (no one can answer ``input()`` there)."""
    shell = kernel_shell()
    if shell is None:
        return False
    try:
        parent = shell.kernel.get_parent("shell") or {}
    except Exception:
        return True  # a kernel whose request cannot be read: a notebook, presumably
    if (parent.get("header") or {}).get("msg_type") != "execute_request":
        return True
    return bool((parent.get("content") or {}).get("allow_stdin"))


def text_stream() -> Any:
    """Where plain-text progress and notices go: the cell's output in a kernel, else stderr (as tqdm and
    pip do), so a script's stdout holds only what the script prints."""
    return sys.stdout if in_kernel() else sys.stderr


def progress_stream() -> Any:
    """Where plain-text progress goes: stderr wherever nobody watches the output as it comes (a script, a
    notebook run headless by papermill or nbconvert), so stdout holds only what the code prints; the cell's
    output in a notebook a person runs."""
    return sys.stdout if in_kernel() and person_at_frontend() else sys.stderr


def cell_parent() -> dict[str, Any] | None:
    """The header of the cell running now (ipykernel's output streams know it), else None."""
    parent = getattr(sys.stdout, "parent_header", None)
    return dict(parent) if isinstance(parent, dict) and parent.get("msg_id") else None


@contextmanager
def in_cell(parent: dict[str, Any] | None) -> Iterator[None]:
    """Attribute what this thread prints to the cell ``parent`` (the one that launched a run), not to
    whichever cell happens to run: ipykernel's streams take a per-thread parent."""
    tokens = []
    if parent:
        for stream in (sys.stdout, sys.stderr):
            if hasattr(stream, "set_thread_parent"):
                try:
                    tokens.append((stream, stream.set_thread_parent(parent)))
                except Exception:  # another kernel's stream: output goes where it would have gone
                    pass
    try:
        yield
    finally:
        for stream, token in reversed(tokens):
            try:
                stream.reset_thread_parent(token)
            except Exception:
                pass


def load_ipywidgets() -> Any:
    """ipywidgets, for a panel, a bar or a browser about to be built. In a widget kernel the first call
    also readies the frontend for widgets (``keep_widget_channel``): that happens when something is first
    shown, never when nbsubagents is imported."""
    try:
        import ipywidgets
    except ImportError:
        raise ImportError(
            "Live panels need ipywidgets: install it with `pip install 'ipywidgets>=8'` (JupyterLab shows "
            "them with jupyterlab_widgets), or show plain text with NBSUBAGENTS_DISPLAY=text.") from None
    if _channel_keeper is None and in_widget_kernel():
        try:
            keep_widget_channel()
        except Exception:  # never let a frontend detail break a panel: it shows all the same
            pass
    return ipywidgets


_shared: dict[tuple[type, tuple[tuple[str, Any], ...]], Any] = {}
_shared_lock = threading.Lock()


def shared(cls: type, **traits: Any) -> Any:
    """The one ``cls`` (an ipywidgets ``Layout`` or style) with these ``traits``, shared by every widget given it.

    Every widget opens a ``Layout`` widget of its own, and most a style widget too: two more comms, models and
    messages for parts that never change. A shared part is opened once per kernel (again if it was closed). Its
    traits are never changed, since every widget that has it would change: a widget is given another shared part
    instead (``button.layout = shared(Layout, display="none")``: one message).
    """
    key = (cls, tuple(sorted(traits.items())))
    with _shared_lock:
        part = _shared.get(key)
        if part is None or part.comm is None:  # a closed widget has no comm
            part = _shared[key] = cls(**traits)
        return part


def new_widget(cls: type, *classes: str, layout: dict[str, Any] | None = None, **traits: Any) -> Any:
    """A ``cls`` widget opened with its state in one comm message: its CSS ``classes`` and ``traits`` go to the
    constructor (each ``add_class`` or trait set after it is one more message), and its layout (``layout``'s
    traits) and style are shared parts (``shared``), not two more widgets."""
    import ipywidgets

    style = cls.class_traits().get("style")  # the widget's style class, e.g. ButtonStyle; a box has none
    if style is not None and "style" not in traits:
        traits["style"] = shared(style.klass)
    return cls(layout=shared(ipywidgets.Layout, **(layout or {})), _dom_classes=classes, **traits)


_subshell_lock = threading.Lock()
_subshell: str | bool | None = None  # None: not tried yet; False: not available


def click_subshell() -> str | None:
    """A kernel subshell (ipykernel >= 7.4) that handles panel clicks; None outside such a kernel.

    A foreground run keeps the kernel's main thread busy until the cell ends, so a click sent to the
    main shell would wait for the run it wants to cancel. Comm messages of a widget are routed to the
    subshell returned here (``route_clicks``), whose own thread runs the click handler at once.
    """
    global _subshell
    with _subshell_lock:
        if _subshell is not None:
            return _subshell or None
        _subshell = False
        if "ipykernel" not in sys.modules:
            return None
        try:
            from ipykernel.kernelbase import Kernel
            if not Kernel.initialized():
                return None
            kernel = Kernel.instance()
            channel = getattr(kernel, "shell_channel_thread", None)
            manager = getattr(channel, "manager", None)
            if not getattr(kernel, "_supports_kernel_subshells", False) or manager is None:
                return None
            created, box = threading.Event(), {}

            def create() -> None:
                try:
                    box["id"] = manager._create_subshell()
                finally:
                    created.set()

            channel.io_loop.add_callback(create)  # subshells are made on the shell channel thread
            if created.wait(5) and box.get("id"):
                _subshell = box["id"]
        except Exception:  # an ipykernel without these internals: clicks wait for the main shell
            _subshell = False
        return _subshell or None


_channel_keeper: Any = None
_keeper_lock = threading.Lock()
FRONTEND_SUBSHELL_WAIT = 0.5  # seconds to wait, once per kernel, for JupyterLab's widget subshell


def keep_widget_channel() -> None:
    """Open one small widget for the kernel's life, and the click subshell, before the first widget shows
    (``load_ipywidgets`` calls it once, in a widget kernel).

    JupyterLab (4.4 and later) answers the first widget with a ``create_subshell_request`` of its own,
    whose busy/idle reaches the page after the cell's own busy: the page then shows the kernel Idle while
    the cell still executes. This widget, which never shows, makes that happen before the first panel,
    bar or browser is built; once the subshell exists (within ``FRONTEND_SUBSHELL_WAIT``) the cell's busy
    is said again. JupyterLab keeps the subshell while any widget lives.
    """
    global _channel_keeper
    ours = click_subshell()
    with _keeper_lock:
        if _channel_keeper is not None:
            return
        import ipywidgets as w  # load_ipywidgets found it

        first = not w.Widget.widgets  # no widget yet: the frontend has no widget subshell yet either
        try:
            from ipykernel.kernelbase import Kernel
            kernel = Kernel.instance()
            manager = kernel.shell_channel_thread.manager
            before = set(manager.list_subshell())
        except Exception:  # an ipykernel without subshells: nothing to wait for
            kernel = manager = None
        _channel_keeper = w.HTML()
        if not first or manager is None:
            return
        deadline = time.monotonic() + FRONTEND_SUBSHELL_WAIT
        while time.monotonic() < deadline:
            if set(manager.list_subshell()) - before - {ours}:
                time.sleep(0.1)  # its reply and idle go out just after the subshell exists
                try:
                    kernel._publish_status("busy", "shell")  # the cell that shows the first widget still executes
                except Exception:
                    pass
                return
            time.sleep(0.01)


def route_clicks(widget: Any, subshell_id: str | None) -> None:
    comm = getattr(widget, "comm", None)
    if subshell_id and comm is not None and hasattr(comm, "_reply_subshell_for"):
        comm._reply_subshell_for = lambda data, default: subshell_id


VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def widget_view(widget: Any) -> dict[str, Any] | None:
    """What a display of ``widget`` carries as ``VIEW_MIME`` (None once it is closed): ipywidgets'
    ``_repr_mimebundle_`` part, without the text repr that method builds first from the repr of every widget
    inside it (for a group of 16 panels that repr cost more CPU than the rest of the record)."""
    if getattr(widget, "comm", None) is None or widget._view_name is None:
        return None
    return {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}


Publish = Callable[[dict[str, Any], str, bool], Any]


def _ipython_publish(bundle: dict[str, Any], display_id: str, update: bool) -> None:
    """Show or replace every output with ``display_id`` (in any cell of the notebook)."""
    from IPython.display import display, update_display
    if update:
        update_display(bundle, raw=True, display_id=display_id)
    else:
        display(bundle, raw=True, display_id=display_id)


class NotebookRecord:
    """An output kept true in the saved notebook: how any view (panel, group, bar, browser) shows.

    A saved output holds what the kernel last sent for it, and JupyterLab (like VS Code) prefers a widget
    view over every other mimetype of the output: reopened without the widget's model (a new kernel, no
    saved widget state) it shows "Error displaying widget: model not found", never the static copy beside
    it. So the output is a display id whose bundle is the view's *static record* (``text/plain`` and
    self-contained ``text/html``), re-sent with ``update_display`` as its subject changes (``update``; the
    frontend renders it after the cell ended too), and the widget view is part of the bundle only while
    the view is interactive (``widget`` given and not ended). ``end()`` sends the record alone: from then
    on the notebook, saved by any frontend at any time, reads the same in JupyterLab, Notebook 7,
    VS Code, nbviewer and GitHub. A view with nothing to click (``widget=None``) never has a widget view
    at all, so it is true whenever the notebook is saved.

    A record still carrying its widget view when the kernel shuts down (a restart or a shutdown from the
    page) is ended then (``end_live_records``, at exit), after ``on_kernel_exit()`` lets the view say so: the
    page that stays open replaces the widget by that record, and saves no widget view.

    ``record()`` returns ``(text, html)``; ``publish(bundle, display_id, update)`` replaces IPython's
    display and update_display (tests). Sending is skipped when the bundle did not change.
    """

    def __init__(self, display_id: str, record: Callable[[], tuple[str, str]], *, widget: Any = None,
                 publish: Publish | None = None, on_kernel_exit: Callable[[], Any] | None = None) -> None:
        self.display_id = display_id
        self.record = record
        self.widget = widget
        self.on_kernel_exit = on_kernel_exit  # called before the last record when the kernel shuts down
        self.ended = False
        self.shown = False
        self._publish = publish or _ipython_publish
        self._last: dict[str, Any] | None = None
        self._lock = threading.RLock()

    def bundle(self) -> dict[str, Any]:
        """What the output carries now: the record, and the widget view while the view is interactive."""
        text, html_text = self.record()
        bundle: dict[str, Any] = {"text/plain": text, "text/html": html_text}
        if self.widget is not None and not self.ended:
            view = widget_view(self.widget)
            if view is not None:
                bundle[VIEW_MIME] = view
        return bundle

    def show(self) -> None:
        """A new output of this record (every output of it is updated together from then on)."""
        with self._lock:
            self._last = self.bundle()
            self._publish(self._last, self.display_id, False)
            self.shown = True
        if VIEW_MIME in self._last:
            _live_records.add(self)
            _end_at_exit()

    def update(self) -> bool:
        """Send the record again if it changed since the last send; True when something was sent."""
        with self._lock:
            if not self.shown:
                return False
            bundle = self.bundle()
            if bundle == self._last:
                return False
            self._last = bundle
            self._publish(bundle, self.display_id, True)
            return True

    def end(self) -> None:
        """The view is over: its outputs become the static record alone, for good."""
        with self._lock:
            self.ended = True
            self.update()
        _live_records.discard(self)


_live_records: weakref.WeakSet[NotebookRecord] = weakref.WeakSet()  # records that still carry a widget view
_exit_hooked = False


def _end_at_exit() -> None:
    """When the kernel shuts down (a restart, a shutdown from the page), every record still carrying a
    widget view is sent once more without it, so the notebook the page saves next holds no widget view of
    this kernel. Registered once, after ipykernel's own exit hooks, so it runs before they close the channels."""
    global _exit_hooked
    if not _exit_hooked:
        _exit_hooked = True
        atexit.register(end_live_records)


def end_live_records() -> None:
    """Turn every record that still carries a widget view into its static record alone (see ``_end_at_exit``)."""
    for record in list(_live_records):
        try:
            if record.on_kernel_exit is not None:
                record.on_kernel_exit()
            record.end()
        except Exception:  # the channels may already be closed: nothing more can be sent
            pass
