"""HTML from templates, and the one stylesheet every HTML output carries.

The templates (``*.html`` here) are Jinja2's, autoescaped; ``render(template, **context)`` renders one, ``part(template,
macro, **context)`` calls one of its macros (each view's pieces are macros of its template; Jinja2 is
imported on the first render, so ``import nbsubagents`` and ``child/`` never load it). Line breaks and the
indentation after them are layout of the template file, not of the output: they are dropped when a template is
loaded, so a fragment is one line (a static record holds no newline and stays one HTML block in Markdown).

``nbsubagents.css`` holds every rule, as ``nbsubagents-`` classes, in sections; ``stylesheet(*sections)`` is the
base, the sections an output uses and the palette's rules (``_style.PALETTE`` generates them: the palette lives there
only) as one ``<style>`` block, so a saved output carries the rules it uses, not all of them. Its colours are the
palette's CSS variables, which switch with the page (light, dark, JupyterLab's theme or the reader's scheme);
every output's outer element paints its own background and text with them (base: "surfaces"). ``inline.html`` is
the one place HTML carries inline styles: ``ink`` (a status's light colour, which survives where a viewer strips
stylesheets; the stylesheet switches to the dark value), ``badge`` (white on the status's colour) and ``share``
(a bar segment's width), which the other templates import.
"""

from __future__ import annotations

import html
import re
from functools import cache
from pathlib import Path
from typing import Any

from .._style import DARK_SCOPE, MUTED, NO_JP_THEME, PAGE, PALETTE, TEXT, duration, filesize, glyph, plural, shorten

__all__ = ["Html", "render", "part", "stylesheet"]

HERE = Path(__file__).resolve().parent


@cache
def _environment() -> Any:
    import jinja2  # noqa: PLC0415  (only when HTML is rendered: import nbsubagents stays without it)
    from markupsafe import Markup  # noqa: PLC0415  (Jinja2's own dependency)

    class Loader(jinja2.FileSystemLoader):
        def get_source(self, environment: Any, template: str) -> tuple[str, str | None, Any]:
            source, path, uptodate = super().get_source(environment, template)
            return re.sub(r"\n[ \t]*", "", source), path, uptodate  # a fragment is one line

    env = jinja2.Environment(loader=Loader(HERE), autoescape=True, keep_trailing_newline=False)
    env.globals.update(stylesheet=lambda *sections: Markup(stylesheet(*sections)),
                       light=lambda status: PALETTE.get(status, MUTED)[0],
                       key=lambda status: status if status in PALETTE else "muted", glyph=glyph, plural=plural,
                       filesize=filesize, shorten=shorten, duration=duration)
    # text: escaped, quotes kept (|text); on one HTML line, each newline a <br> (|br)
    env.filters["n"] = lambda number: f"{number:,}"
    env.filters["text"] = lambda text: Markup(html.escape(str(text), quote=False))
    env.filters["br"] = lambda text: Markup(html.escape(str(text), quote=False).replace("\r", "").replace("\n", "<br>"))
    return env


class Html(str):
    """HTML made elsewhere (its text escaped there): a template inserts it as it is (markupsafe's __html__)."""

    def __html__(self) -> str:
        return self


def render(template: str, /, **context: Any) -> str:
    """The template file ``template`` rendered with ``context``; every value is escaped but ``Html``."""
    return _environment().get_template(template).render(context)


def part(template: str, macro: str, /, **context: Any) -> str:
    """The macro ``macro`` of the template file ``template`` called with ``context``, escaped but ``Html``."""
    return str(getattr(_macros(template), macro)(**context))


@cache
def _macros(template: str) -> Any:
    return _environment().get_template(template).module


def palette_vars(dark: bool) -> str:
    """The palette as CSS variables (``--nbsubagents-<status>``, ``-muted``, ``-page``, ``-text``) of a light or
    dark page: what a scope's rule sets (the docs' stylesheet sets them under its theme's switch too)."""
    coloured = {**PALETTE, "muted": MUTED, "page": PAGE, "text": TEXT}
    return "".join(f"--nbsubagents-{name}:{pair[dark]};" for name, pair in coloured.items())


def site_theme_rules(dark: str, light: str) -> str:
    """The palette's variables under a site's own theme switch, for a site whose dark mode is not the reader's
    scheme (a docs theme's toggle): ``dark`` and ``light`` select the root element of each (the docs:
    ``html[data-theme="dark"]``); they outweigh the stylesheet's own scheme rule."""
    return f"{dark} body{{{palette_vars(True)}}}{light} body{{{palette_vars(False)}}}"


def _palette_rules() -> dict[str, str]:
    """The rules ``_style.PALETTE`` makes: ``vars`` (every sheet has them: the light values, switched to the dark
    ones under a dark JupyterLab theme and, with no JupyterLab theme, under the reader's dark scheme; each status's
    light value as ``-bg`` too, under white text), ``colours`` and the rule colour of a record (``edges``) and of a
    live panel (``live_edges``)."""
    solid = "".join(f"--nbsubagents-{s}-bg:{light};" for s, (light, _) in PALETTE.items())
    root = (":root{" + palette_vars(False) + solid + "}" + DARK_SCOPE + "{" + palette_vars(True) + "}"
            "@media (prefers-color-scheme: dark){" + NO_JP_THEME + "{" + palette_vars(True) + "}}")
    # over the inline light value (inline.html), in whatever the page's variables say
    colour = "".join(f".nbsubagents-c-{s}{{color:var(--nbsubagents-{s}) !important}}" for s in (*PALETTE, "muted"))
    edged = [s for s in PALETTE if s != "queued"]
    return {"vars": root, "colours": colour,
            # a panel's rule in its status's colour (no status-class names here: a text search for a record's
            # status finds the record's, not the sheet's)
            "edges": "".join(f'.nbsubagents-static[data-status="{s}"]{{border-left-color:var(--nbsubagents-{s})}}'
                             for s in edged),
            "live_edges": "".join(f".nbsubagents-panel.nbsubagents-live:has(.nbsubagents-icon.nbsubagents-c-{s})"
                                  f"{{border-left-color:var(--nbsubagents-{s})}}" for s in edged)}


@cache
def _sections() -> dict[str, str]:
    """``nbsubagents.css`` by section (``/* -- <name>:`` starts one), minified, then the palette's."""
    css = (HERE / "nbsubagents.css").read_text(encoding="utf-8")
    parts = re.split(r"^(?=/\* -- \w+:)", css, flags=re.M)[1:]
    rules = {re.match(r"/\* -- (\w+):", part)[1]: re.sub(r"\s*\n\s*", "", re.sub(r"/\*.*?\*/", "", part, flags=re.S))
             for part in parts}
    return {**rules, **_palette_rules()}


@cache
def stylesheet(*sections: str) -> str:
    """The rules of ``sections`` (of ``nbsubagents.css``, or the palette's ``colours`` and ``edges``) after its base
    and the palette's variables, as one ``<style>`` block on one line; no section named: every rule."""
    return "<style>" + "".join(rules for name, rules in _sections().items()  # in the file's order, the palette's last
                               if not sections or name in sections or name in ("base", "vars")) + "</style>"
