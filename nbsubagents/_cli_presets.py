"""``nbsubagents presets [list|show|new|set|copy|delete]``: presets listed, made and changed from the shell, through
``preset_files.write`` (each file checked by the parser that reads it before it is written). One entry of
``cli.COMMANDS``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from ._child.text import clip, terminal_safe
from ._cli_shell import echo, echo_json, subcommand
from ._preset_files import PresetError, PresetWarning, split_tool_list, write
from ._views.presets import list_presets, notes


def add_presets(sub: Any) -> None:
    """``nbsubagents presets [list|show|new|set|copy|delete]``: presets made and changed from the shell."""
    cmd = subcommand(sub, "presets", "list, show, make, change, copy and delete presets", """\
  nbsubagents presets                                  # name, scope, model, description, file
  nbsubagents presets show scout
  nbsubagents presets new tester --description "Runs the tests" --tools read,bash --model anthropic/claude-sonnet-4-5
  nbsubagents presets set tester max_tool_calls=20 thinking=
  nbsubagents presets copy code-reviewer reviewer      # a Claude Code agent into a pi preset
  nbsubagents presets delete tester""",
                     "The presets a run can name here; without an action, the list. new, copy and delete act on "
                     "the project's .pi/subagents/ (--global: pi's agent dir); set changes the preset a run would "
                     "pick. Files are checked by the parser that reads them before they are written.")
    cmd.add_argument("--json", action="store_true", help="the list as JSON")
    actions = cmd.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="name, scope, model, description and file of every preset")
    listing.add_argument("--json", action="store_true", help="as JSON")
    actions.add_parser("show", help="a preset's file: its fields and prompt").add_argument("name", metavar="NAME")
    new = actions.add_parser("new", help="write a new preset (refused if one of that name exists in the scope)")
    new.add_argument("name", metavar="NAME")
    new.add_argument("--description", required=True, metavar="D", help="when to pick this preset")
    new.add_argument("--model", metavar="M", help="its default model, e.g. anthropic/claude-sonnet-4-5")
    new.add_argument("--tools", metavar="a,b", help="the tools the child may use, e.g. read,grep,find")
    prompt = new.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", metavar="TEXT", default="", help="the system prompt (the file's body)")
    prompt.add_argument("--prompt-file", metavar="F", help="read the system prompt from file F")
    change = actions.add_parser("set", help="change fields: FIELD=VALUE (VALUE read as YAML); FIELD= removes it")
    change.add_argument("name", metavar="NAME")
    change.add_argument("fields", nargs="+", metavar="FIELD=VALUE")
    copy = actions.add_parser("copy", help="copy a preset (a Claude Code agent too) into a new pi preset")
    copy.add_argument("name", metavar="NAME")
    copy.add_argument("new_name", metavar="NEW")
    delete = actions.add_parser("delete", help="delete a preset's file")
    delete.add_argument("name", metavar="NAME")
    for action in (new, copy, delete):
        action.add_argument("--global", dest="global_scope", action="store_true",
                            help="in pi's agent dir (subagents/) instead of the project's .pi/subagents/")
    cmd.set_defaults(handler=presets_command)


def presets_command(args: argparse.Namespace) -> int:
    """Run one ``presets`` action; a refused one says why on stderr (exit 1, or 2 for a malformed FIELD=VALUE)."""
    scope = "global" if getattr(args, "global_scope", False) else "project"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PresetWarning)
        try:
            code = _presets_action(args, scope)
        except PresetError as exc:
            echo(f"nbsubagents presets: {exc}", file=sys.stderr)
            code = 2 if isinstance(exc, write.AssignmentError) else 1
        except OSError as exc:
            echo(f"nbsubagents presets: {exc}", file=sys.stderr)
            code = 1
    for warning in caught:
        if issubclass(warning.category, PresetWarning):
            echo(f"! {warning.message}", file=sys.stderr)
    return code


def _presets_action(args: argparse.Namespace, scope: str) -> int:
    if args.action in (None, "list"):
        return _list_presets(as_json=args.json)
    if args.action == "show":
        return _show_preset(args.name)
    if args.action == "new":
        text = Path(args.prompt_file).read_text(encoding="utf-8") if args.prompt_file else args.prompt
        tools = [t.strip() for t in split_tool_list(args.tools)] if args.tools is not None else None
        made = write.new_preset(args.name, description=args.description, model=args.model, tools=tools,
                                prompt=text, scope=scope)
        echo(f"Wrote {made.scope} preset {made.name}: {made.path}", file=sys.stderr)
    elif args.action == "set":
        changed = write.edit_fields(args.name, write.parse_assignments(args.fields))
        echo(f"Changed {changed.scope} preset {changed.name}: {changed.path}", file=sys.stderr)
    elif args.action == "copy":
        made = write.copy_preset(args.name, args.new_name, scope=scope)
        echo(f"Copied {args.name} to {made.scope} preset {made.name}: {made.path}", file=sys.stderr)
    elif args.action == "delete":
        echo(f"Deleted {scope} preset {args.name}: {write.delete_preset(args.name, scope=scope)}", file=sys.stderr)
    return 0


def _list_presets(*, as_json: bool) -> int:
    found = list_presets()
    rows = [{"name": p.name, "scope": p.scope, "model": p.model, "description": p.description, "path": str(p.path),
             "notes": notes(p)} for p in found]
    if as_json:
        echo_json(rows)
    elif rows:
        widths = {key: max(len(key), *(len(clip(str(row[key] or "-"), 60)) for row in rows))
                  for key in ("name", "scope", "model", "description")}
        echo("  ".join(key.upper().ljust(widths[key]) for key in widths) + "  PATH")
        for row in rows:
            echo("  ".join(clip(str(row[key] or "-"), 60).ljust(widths[key]) for key in widths) + "  " + row["path"])
    else:
        echo("No presets yet: nbsubagents presets new NAME --description '...' (or nbsubagents init)",
             file=sys.stderr)
    for head, items in found.sections():  # the files not loaded, names several files claim, notes: grouped
        echo(head, file=sys.stderr)
        for name, scope, text in items:
            echo(f"  {name} ({scope}): {text}", file=sys.stderr)
    return 0


def _show_preset(name: str) -> int:
    path, scope = write.visible_file(name)
    echo(f"# {scope} preset {name}: {path}", file=sys.stderr)
    sys.stdout.write(terminal_safe(path.read_text(encoding="utf-8-sig")))
    return 0
