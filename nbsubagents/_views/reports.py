"""A report you can send: one self-contained HTML file (or Markdown) of some runs, with secrets masked.

``report(runs, path=None, format=None)`` writes, per run: its panel header (the same words as
the live panel), the task, status, model, tokens, cost, timings, the transcript (the formatter's lines),
the final output, the files it changed, and links to the other runs of its group (one ``run_parallel``
call). HTML carries the package's stylesheet, no script, and loads nothing; Markdown is for pasting into an issue.

Secrets are masked in everything written, before anything is cut short (``child.secrets``: secret-named
environment variables, the keys in pi's ``models.json`` and ``auth.json``, common key shapes, the
``secret_patterns`` setting). Names, headings and table cells are escaped for Markdown, file names sit in code
spans they cannot break out of, and neither format carries control bytes (NUL, ESC, ...). A report is written
to a temporary file and moved into place: a failed write leaves no temporary file and the old report whole.
"""

from __future__ import annotations

import itertools
import os
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._child import VERSION
from .._child.artifacts import unreadable
from .._child.formatter import ProgressFormatter
from .._child.text import clip, strip_controls
from .._config import NbSubagentsError, project_root
from .._style import duration, glyph
from .._templates import Html, part, render
from . import delegated
from .masking import MaskedRun, masker
from .panel_state import PanelState

if TYPE_CHECKING:
    from .._lifecycle.handle import Run

__all__ = ["report"]

TRANSCRIPT_LINES = 5_000
CARD_TEXT = 600  # characters of a sub-run's task or answer shown under its parent's call
FORMATS = ("html", "md")


# -- the runs -------------------------------------------------------------------------------------------
def _facts(run: Run) -> dict[str, Any]:
    result = run.result or {}
    usage = result.get("usage") or {}
    return {
        "status": run.status, "model": run.model or "no model", "preset": run.preset or "",
        "harness": run.harness,
        "tokens": usage.get("totalTokens") or 0, "input": usage.get("input") or 0, "output": usage.get("output") or 0,
        "cacheRead": usage.get("cacheRead") or 0, "cacheWrite": usage.get("cacheWrite") or 0,
        "cost": usage.get("cost") or 0.0, "toolCalls": result.get("toolCalls") or 0, "turns": result.get("turns"),
        "created": run.record.created_at, "started": result.get("startedAt"), "ended": result.get("endedAt"),
        "duration": result.get("durationSeconds"), "cwd": run.record.cwd or "",
        "group": run.record.group, "mode": run.record.mode or "", "inputs": _inputs(run),
    }


def _inputs(run: Run) -> list[tuple[str, str]]:
    """Each input the run was given: its name and ``kind, N bytes, sha256 HEAD…, its file``."""
    return [(str(e.get("name")), f"{e.get('kind')}, {e.get('bytes') or 0:,} bytes, sha256 "
             f"{str(e.get('sha256'))[:12]}…, {e.get('file')}") for e in run.record.inputs or [] if isinstance(e, dict)]


def _lines(run: Run) -> list[tuple[str, Any]]:
    """(kind, text) of every formatter line of the run, from its events (the transcript's words); after a delegate
    call's result (or its call, when it has none), ``("subrun", card)`` for each sub-run it started (``_card``)."""
    formatter = ProgressFormatter(run.record.cwd)
    lines: list[tuple[str, Any]] = []
    events = run.events()
    kids = {k.run_id: k for k in _kids(run)}
    by_call = delegated.calls_of(events, [(k.run_id, k.preset, k.task, k.record.tool_call)
                                          for k in kids.values()]) if kids else {}
    answered = {e.get("id") for e in events if e.get("type") == "tool_result"}
    for event in events:
        line = formatter.format(event)
        for row in (line.text.split("\n") if line is not None else ()):
            if row.strip():
                lines.append((line.kind, row.rstrip()))
        kind, call = event.get("type"), event.get("id")
        if call in by_call and (kind == "tool_result" or (kind == "tool_call" and call not in answered)):
            lines += [("subrun", _card(kids[k])) for k in by_call.pop(call)]
    lines += [("subrun", _card(kids[k])) for ks in by_call.values() for k in ks]  # no call of its events is known
    return lines


def _kids(run: Run) -> list[Run]:
    """The runs ``run`` delegated, oldest first, masked as it is (none for a run that is no ``Run``)."""
    kids = getattr(run, "children", None) or []
    return [k if isinstance(k, MaskedRun) else MaskedRun(k, getattr(run, "_mask", None)) for k in kids]


def _card(run: Run, seen: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A sub-run as its parent's transcript shows it under the call that started it: preset, status, task, answer,
    spend, its anchor in the report, and its own sub-runs' cards (a cycle of rows ends the walk)."""
    f = _facts(run)
    seen = seen | {run.run_id}
    return {"run_id": run.run_id, "anchor": _anchor(run.run_id), "name": run.name, "preset": f["preset"],
            "status": f["status"], "task": clip(run.task.strip(), CARD_TEXT),
            "answer": clip((run.output or run.error or "").strip(), CARD_TEXT), "cost": f["cost"],
            "tokens": f["tokens"], "took": f["duration"],
            "kids": [_card(k, seen) for k in _kids(run) if k.run_id not in seen]}


def with_subtrees(runs: list[Run]) -> list[Run]:
    """``runs``, each followed by every run under it (depth first) that is not already among them: a report of a
    tree has a section for each of its runs, and its totals are the tree's."""
    out: list[Run] = []
    listed = {r.run_id for r in runs}

    def add(run: Run) -> None:
        out.append(run)
        for kid in _kids(run):
            if kid.run_id not in listed:
                listed.add(kid.run_id)
                add(kid)

    for run in runs:
        add(run)
    return out


def call_groups(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs of one parallel call, by their group id (from their records), among the runs of the report."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        group = run.record.group
        if group:
            groups.setdefault(group, []).append(run)
    return groups


def _when(iso: str | None) -> str:
    if not iso:
        return "—"
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    except ValueError:
        return iso


# -- HTML -------------------------------------------------------------------------------------------------
def run_html(run: Run, groups: dict[str, list[Run]], listed: set[str], *, folded: bool = False) -> str:
    """A run's section of a report: its facts, task, output, error, files and transcript."""
    others = [r for r in groups.get(run.record.group or "", []) if r.run_id != run.run_id and r.run_id in listed]
    return part("report.html", "run", r=run, f=_facts(run), header=PanelState.of_run(run).static_text().splitlines()[0],
                others=others, lines=_lines(run), limit=TRANSCRIPT_LINES, folded=folded, when=_when,
                unread=unreadable(run.dir), tree=tree_total(run), parent=_parent(run, listed))


def _parent(run: Run, listed: set[str]) -> tuple[str, bool] | None:
    """The run that delegated ``run`` (its id, and whether the report has its section), None: a notebook's run."""
    parent = run.record.parent
    return (parent, parent in listed) if isinstance(parent, str) and parent else None


def tree_total(run: Run) -> dict[str, Any] | None:
    """What ``run`` and every run under it spent together: runs, tokens, cost (None: it delegated nothing)."""
    nodes, todo, seen = [], [run], set()
    while todo:
        node = todo.pop()
        if node.run_id not in seen:
            seen.add(node.run_id)
            nodes.append(_facts(node))
            todo += _kids(node)
    if len(nodes) == 1:
        return None
    return {"runs": len(nodes), "tokens": sum(f["tokens"] for f in nodes), "cost": sum(f["cost"] for f in nodes)}


def _document_html(runs: list[Run], title: str) -> str:
    groups, listed = call_groups(runs), {r.run_id for r in runs}
    rows = [(run, _facts(run)) for run in runs]
    summary = (f'{len(runs)} run{"" if len(runs) == 1 else "s"} · {sum(f["tokens"] for _, f in rows):,} tokens · '
               f'${sum(f["cost"] for _, f in rows):.4f} · written '
               f'{datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")} by nbsubagents {VERSION} · secrets masked')
    sections = Html("".join(run_html(run, groups, listed) for run in runs))
    return page(title, part("report.html", "runs", title=title, summary=summary, rows=rows, sections=sections))


def page(title: str, body: str) -> str:
    """A report's HTML file: ``body`` (HTML) under ``title``, with the stylesheet."""
    return render("page.html", title=title, body=Html(body)) + "\n"


# -- Markdown -------------------------------------------------------------------------------------------
def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def block(text: str) -> str:
    fence = _fence(text)
    return f"{fence}text\n{text}\n{fence}"


_MD_INLINE = re.compile(r"([\\`*_\[\]<>#|~&])")
_MD_LINE_START = re.compile(r"^(\s*)([-+=]|\d+)([.)]?)")


def md_cell(text: Any) -> str:
    """Text in a Markdown table cell, shown as it is: emphasis, links, HTML, pipes and entities escaped."""
    return _MD_INLINE.sub(r"\\\1", " ".join(strip_controls(str(text)).split()))


def md_line(text: Any) -> str:
    """Text on one Markdown line, shown as it is: a cell's escapes, and no list item or heading underline at its
    start (``- x`` becomes ``\\- x``, ``1. x`` becomes ``1\\. x``)."""
    def escape(m: re.Match[str]) -> str:
        lead, mark, dot = m.groups()
        if mark.isdigit():
            return lead + mark + ("\\" + dot if dot else "")
        return lead + "\\" + mark + dot

    return _MD_LINE_START.sub(escape, md_cell(text))


def _code(text: Any) -> str:
    """A code span that nothing inside can close: a fence longer than any run of backticks in it, one line."""
    text = strip_controls(str(text).replace("\r", "\\r").replace("\n", "\\n"))
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _document_md(runs: list[Run], title: str) -> str:
    groups = call_groups(runs)
    listed = {r.run_id for r in runs}
    out = [f"# {md_line(title)}", ""]
    total_tokens = sum(_facts(r)["tokens"] for r in runs)
    total_cost = sum(_facts(r)["cost"] for r in runs)
    out += [f"{len(runs)} run{'' if len(runs) == 1 else 's'} · {total_tokens:,} tokens · ${total_cost:.4f} · "
            "secrets masked", "", "| run | status | model | tool calls | tokens | cost | took | id |",
            "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        f = _facts(run)
        anchor = _anchor(run.run_id)
        took = duration(f["duration"]) if isinstance(f["duration"], (int, float)) else "—"
        out.append(f"| [{md_cell(run.name)}](#{anchor}) | {glyph(f['status'])} {md_cell(f['status'])} | "
                   f"{md_cell(f['model'])} | {f['toolCalls']} | {f['tokens']:,} | ${f['cost']:.4f} | {took} | "
                   f"{_code(run.run_id)} |")
    for run in runs:
        out += run_md(run, groups, listed)
    return "\n".join(out) + "\n"


def run_md(run: Run, groups: dict[str, list[Run]], listed: set[str]) -> list[str]:
    """The Markdown lines of one run: its facts, task, output, error and its transcript folded."""
    out: list[str] = []
    f = _facts(run)
    anchor = _anchor(run.run_id)
    header = PanelState.of_run(run).static_text().splitlines()[0]
    took = duration(f["duration"]) if isinstance(f["duration"], (int, float)) else "—"
    out += ["", f'<a id="{anchor}"></a>', "", f"## {md_line(header)}", "",
            f"- **Run id:** {_code(run.run_id)}", f"- **Status:** {glyph(f['status'])} {md_line(f['status'])}",
            f"- **Model:** {md_line(f['model'])} (preset {md_line(f['preset']) or '—'}, harness "
            f"{md_line(f['harness'])}, {md_line(f['mode']) or '—'})",
            f"- **Tokens:** {f['tokens']:,} (input {f['input']:,}, output {f['output']:,}, cache read "
            f"{f['cacheRead']:,}, cache write {f['cacheWrite']:,}) · **Cost:** ${f['cost']:.4f} · "
            f"**Tool calls:** {f['toolCalls']}",
            f"- **Started:** {md_line(_when(f['started']))} · **Ended:** {md_line(_when(f['ended']))} · "
            f"**Took:** {took}"]
    if parent := _parent(run, listed):
        out.append("- **Delegated by:** " + (f"[{_code(parent[0])}](#{_anchor(parent[0])})" if parent[1] else
                                            _code(parent[0])))
    if f["group"]:
        others = [r for r in groups.get(f["group"], []) if r.run_id != run.run_id and r.run_id in listed]
        out.append("- **Same call as:** " + (", ".join(f"[{md_line(r.name)}](#{_anchor(r.run_id)})" for r in others) or
                                              "no other run of its call is in this report"))
    if f["inputs"]:
        out.append("- **Inputs:** " + "; ".join(f"{_code(name)} {md_line(words)}" for name, words in f["inputs"]))
    if tree := tree_total(run):
        out.append(f"- **Its tree:** {tree['runs']} runs · {tree['tokens']:,} tokens · ${tree['cost']:.4f} (this run "
                   "and every run under it)")
    changed = run.files_changed
    out.append("- **Files changed:** " + (", ".join(_code(p) for p in changed) if changed else "none"))
    out += ["", "**Task**", "", block(run.task)]
    if run.output.strip():
        out += ["", "**Final output**", "", block(run.output.strip())]
    if run.error:
        out += ["", "**Error**", "", block(run.error)]
    if unread := unreadable(run.dir):  # what a child put in place of its run's files
        out += ["", "**Not read**", "", *(f"- {md_line(why)}" for why in unread)]
    lines = _lines(run)
    cards = [card for kind, card in lines if kind == "subrun"]
    if cards:
        out += ["", "**Sub-agents** (each under the delegate call that started it in the transcript)", "",
                *(row for card in cards for row in _card_md(card))]
    lines = [("subrun", _card_line(text)) if kind == "subrun" else (kind, text) for kind, text in lines]
    shown = "\n".join(text for _, text in lines[:TRANSCRIPT_LINES])
    if len(lines) > TRANSCRIPT_LINES:
        shown += f"\n… {len(lines) - TRANSCRIPT_LINES:,} more lines in {run.paths.transcript}"
    out += ["", f"<details><summary>Transcript ({len(lines):,} lines)</summary>", "", block(shown), "",
            "</details>"]
    return out


def _card_line(card: dict[str, Any], indent: str = "    ") -> str:
    """A sub-run's line in its parent's transcript (and its sub-runs' under it): ``↳ sub-run ID (preset) status``."""
    head = (f"{indent}↳ sub-run {card['run_id']} ({card['preset']}) {glyph(card['status'])} {card['status']} · "
            f"${card['cost']:.4f}: see #{card['anchor']}")
    return "\n".join([head, *(_card_line(kid, indent + "    ") for kid in card["kids"])])


def _card_md(card: dict[str, Any], indent: str = "") -> list[str]:
    """A sub-run's item in its parent's list of sub-agents, its own nested under it."""
    took = duration(card["took"]) if isinstance(card["took"], (int, float)) else "—"
    out = [f"{indent}- [{md_cell(card['name'])}](#{card['anchor']}) {glyph(card['status'])} {md_cell(card['status'])}"
           f" · preset {md_cell(card['preset']) or '—'} · {card['tokens']:,} tokens · ${card['cost']:.4f} · {took} · "
           f"{_code(card['run_id'])}",
           f"{indent}  - **Task:** {md_cell(card['task'])}"]
    if card["answer"]:
        out.append(f"{indent}  - **Answer:** {md_cell(card['answer'])}")
    for kid in card["kids"]:
        out += _card_md(kid, indent + "  ")
    return out


def _anchor(run_id: str) -> str:
    """The anchor of a run: ``run-<id>``, with only the characters a URL fragment and an attribute keep as they are."""
    return "run-" + re.sub(r"[^A-Za-z0-9_.-]", "-", run_id)


# -- the entry point ----------------------------------------------------------------------------------------
def report(runs: list[Run], path: str | Path | None = None, *, format: str | None = None,
           title: str | None = None, root: Path | None = None) -> Path:
    """Write a report of these runs and return its path.

    ``runs``: the runs (``nbsubagents.report`` also takes run ids or a ``runs()`` DataFrame). ``path``: where
    to write; by default a new ``<root>/.pi/subagents/reports/report-<time>.html`` (``-2``, ``-3``... when
    another report has that name: none is overwritten). ``root``: the project (default: the current one).
    ``format``: ``"html"``
    (self-contained, no script, no network) or ``"md"`` (Markdown for an issue); by default from the
    path's suffix (``.md``/``.markdown`` is Markdown), else HTML. Secrets are masked.
    """
    runs = list(runs)
    if not runs:
        raise NbSubagentsError("report() got no runs: pass a Run, a list of Runs or a non-empty runs() DataFrame")
    if format is None:
        format = "md" if path is not None and Path(path).suffix.lower() in (".md", ".markdown") else "html"
    format = {"markdown": "md", "htm": "html"}.get(format, format)
    if format not in FORMATS:
        raise NbSubagentsError(f'report format must be "html" or "md", got {format!r}')
    if path is not None and Path(path).expanduser().is_dir():
        raise NbSubagentsError(f"report path {path} is a directory: give a file name such as "
                               f"{Path(path) / 'report.html'}")
    masks = masker()
    runs = [MaskedRun(run, masks) for run in runs]  # masked before any line or header is cut short
    title = title or (f"Sub-agent run {runs[0].name} ({runs[0].run_id})" if len(runs) == 1 else
                      f"Sub-agent runs ({len(runs)})")
    runs = with_subtrees(runs)  # a run's sub-agents have their sections too, and count in the totals
    text = _document_md(runs, title) if format == "md" else _document_html(runs, title)
    text = strip_controls(masks.text(text))
    if path is not None:
        target = Path(path).expanduser()
        write_atomic(target, text)
        return target
    target = _new_name((root or project_root()) / ".pi" / "subagents" / "reports", format)
    try:
        write_atomic(target, text)
    except BaseException:
        target.unlink(missing_ok=True)  # the name it took
        raise
    return target


def _new_name(folder: Path, format: str) -> Path:
    """A report name no other report has: ``report-<time>.<format>``, else ``report-<time>-2.<format>``, ... It is
    taken by creating the (empty) file, which fails for a name that exists: two reports written in the same
    second, by one process or two, each get their own."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    names = (f"report-{stamp}.{format}" if n == 1 else f"report-{stamp}-{n}.{format}" for n in itertools.count(1))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            try:
                os.close(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                return folder / name
            except FileExistsError:
                pass
    except OSError as exc:
        raise NbSubagentsError(f"Cannot write a report into {folder}: {exc.strerror or exc}") from None
    raise AssertionError("itertools.count() ended")


def write_atomic(target: Path, text: str) -> None:
    """``text`` into ``target`` through a temporary file beside it: on any failure the temporary file is removed
    and what ``target`` held is untouched."""
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        name = str(target.parent / f".{target.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for any file
        tmp = name
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise NbSubagentsError(f"Cannot write the report to {target}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass

