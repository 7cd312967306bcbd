"""What every subcommand of the ``nbsubagents`` console script says through: ``echo`` (``print`` with control
characters escaped, so what a run wrote never drives the terminal), ``echo_json``, ``subcommand`` (a parser whose
``--help`` ends with its examples and the exit codes) and ``for_shell`` (a message's Python calls in the form a person
types in the shell). ``cli`` and ``cli_presets`` build on it.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from ._child.text import terminal_safe

EXIT_CODES = """\
exit codes:
  0    ok
  1    a problem: doctor found one, a run could not be cancelled or talked to, no such run
       (`nbsubagents run --help` says what run's codes mean)
  2    a usage error: an unknown command, option, status or time
  130  interrupted (Ctrl-C)
  141  the reader of a pipe went away (`nbsubagents runs | head -3`), as git does"""

# Python calls that some messages of the package suggest, in the form a person in the shell types instead.
SHELL_FORMS = {
    "nbsubagents.status(include_completed=True) lists the runs": "`nbsubagents runs` lists them",
    "nbsubagents.demo.use_scripted_model()": "`nbsubagents init --offline`",
    # lifecycle.converse's words
    "run.follow_up(text) continues its session": "`nbsubagents followup RUN TEXT` continues its session",
    "run.questions lists the open ones; run.wait_for_question() waits for the next":
        "`nbsubagents show RUN` lists the open ones",
    "with run.answer(...)": "with `nbsubagents answer RUN TEXT`",
    "answer True, 'allow' or 'yes' to allow, False, 'deny' or 'no' to deny (None: no answer)":
        "answer allow or yes to allow, deny or no to deny (or `nbsubagents approve RUN allow|deny`)",
    " (None: no answer)": "",
    ", or None for no answer": "",
    "e.g. run.steer('look at the tests first')": "e.g. `nbsubagents steer RUN look at the tests first`",
    "e.g. run.follow_up('now write the summary to NOTES.md')":
        "e.g. `nbsubagents followup RUN now write the summary to NOTES.md`",
}


def echo(*values: object, file: Any = None) -> None:
    """``print``, with every control character shown escaped (``\\x1b``): what a run or a file wrote never
    drives the terminal (no clipboard writes, window titles or cleared screens)."""
    print(*(terminal_safe(str(v)) for v in values), file=file)


def echo_json(value: object) -> None:
    """``value`` as JSON that is safe in a terminal and valid for a program: every non-ASCII character and DEL
    written as a ``\\u`` escape, so no control character reaches the terminal and none is escaped twice."""
    print(json.dumps(value, indent=2, ensure_ascii=True).replace("\x7f", "\\u007f"))


def for_shell(message: str) -> str:
    """``message`` with each Python call it suggests replaced by its shell form (``SHELL_FORMS``)."""
    for python, shell in SHELL_FORMS.items():
        message = message.replace(python, shell)
    return message


def subcommand(sub: Any, name: str, summary: str, examples: str, description: str | None = None,
               codes: str = EXIT_CODES) -> argparse.ArgumentParser:
    """A subcommand's parser whose ``--help`` ends with its examples and its exit codes."""
    return sub.add_parser(name, help=summary, description=textwrap.fill(description or summary, 79),
                          epilog=f"examples:\n{examples.rstrip()}\n\n{codes}",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
