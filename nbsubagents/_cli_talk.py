"""The commands that talk to a run (``steer``, ``followup``, ``answer``, ``approve``) and what ``show`` and ``run
--json`` say of one run (``run_facts``); part of the ``nbsubagents`` console script (``cli``)."""

from __future__ import annotations

import argparse
from typing import Any

from ._child.artifacts import unreadable
from ._child.summary import summary_line
from ._cli_shell import echo, subcommand
from ._lifecycle import converse, reconcile
from ._lifecycle.handle import get_run
from ._views.masking import MaskedRun, masker

__all__ = ["run_facts", "question_lines", "add_steer", "add_followup", "add_answer", "add_approve"]


def run_facts(run: Any) -> dict[str, Any]:
    """One run as ``show --json`` and ``run --json`` print it, secrets masked."""
    run, masks = MaskedRun(run), masker()
    paths = run.paths
    return {"run_id": run.id, "name": run.name, "preset": run.preset, "harness": run.harness,
            "status": run.status, "stop_reason": (run.result or {}).get("stopReason"), "model": run.model,
            "summary": summary_line(run).partition("\n")[0], "task": run.task, "output": run.output,
            "data": masks.data(run.data), "error": run.error, "resumed_from": run.record.resumed_from,
            "questions": [masks.data(q) for q in run.questions], "unread": unreadable(paths.dir),
            "run_dir": str(paths.dir), "transcript": str(paths.transcript), "events": str(paths.events)}


def question_lines(run_id: str, questions: list[dict[str, Any]]) -> list[str]:
    """Each open question with the command that answers it (and its id when there are several)."""
    lines = []
    for q in questions:
        which = f" --question {q.get('id')}" if len(questions) > 1 else ""
        lines += [converse.describe(q), f"  answer: {converse.how_to_answer(run_id, q)}{which}"]
    return lines



# -- steer, followup, answer, approve: talking to a run -----------------------------------------------------
def _run_and_text(sub: Any, name: str, summary: str, examples: str, text_help: str) -> argparse.ArgumentParser:
    cmd = subcommand(sub, name, summary, examples)
    cmd.add_argument("run", help="a run id or a unique prefix of one")
    cmd.add_argument("text", nargs="+", metavar="TEXT", help=text_help + " (several words are joined by spaces)")
    return cmd


def _talked_to(given: str) -> Any:
    """The run a command talks to; a run whose supervisor is gone is settled first, so it is not talked to."""
    reconcile.reconcile(reattach=False)
    return get_run(given)


def add_steer(sub: Any) -> None:
    cmd = _run_and_text(sub, "steer", "tell a running run something: the child reads it after its current tool "
                                      "call", """\
  nbsubagents steer a1b2c3 read OTHER.md instead
  nbsubagents steer a1b2c3 stop editing and list what you changed""", "what to tell it")
    cmd.set_defaults(handler=steer_run)


def steer_run(args: argparse.Namespace) -> int:
    run = _talked_to(args.run)
    run.steer(" ".join(args.text))
    echo(f"{run.id}: steered (the child reads it after its current tool call)")
    return 0


def add_followup(sub: Any) -> None:
    cmd = _run_and_text(sub, "followup", "follow up on a run: after its current turn, or, when it has ended, as "
                                         "a new run that continues its session", """\
  nbsubagents followup a1b2c3 now write the summary to NOTES.md
  nbsubagents followup a1b2c3 "and the tests?"     # an ended run: prints the new run's id""",
                        "the next message")
    cmd.set_defaults(handler=follow_up_run)


def follow_up_run(args: argparse.Namespace) -> int:
    run = _talked_to(args.run)
    new = converse.follow_up(run.paths, " ".join(args.text), show=False)  # no progress: this command returns
    if new is None:
        echo(f"{run.id}: followed up (the child reads it after its current turn)")
    else:
        echo(f"{run.id} had ended ({run.status}): continued as run {new.id} in the background "
             f"(`nbsubagents show {new.id}`)")
    return 0


def add_answer(sub: Any) -> None:
    cmd = _run_and_text(sub, "answer", "answer the question a run waits on (the oldest open one, or --question)",
                        """\
  nbsubagents show a1b2c3                 # what it asks
  nbsubagents answer a1b2c3 use the staging database
  nbsubagents answer a1b2c3 2             # a choice: the option's text or its number from 1
  nbsubagents answer a1b2c3 allow --question 7f3e   # a yes/no question: allow, yes, deny or no""",
                        "the answer: text, one of the options (or its number), or allow/yes/deny/no")
    cmd.add_argument("--question", metavar="ID", help="the question's id (or a unique prefix): `nbsubagents show "
                                                      "RUN` lists them; default: the oldest open one")
    cmd.set_defaults(handler=answer_run)


def answer_run(args: argparse.Namespace) -> int:
    run = _talked_to(args.run)
    asked = run.answer(" ".join(args.text), question=args.question)
    echo(f"{run.id}: answered {converse.describe(asked)}: {asked['answer']}")
    return 0


def add_approve(sub: Any) -> None:
    cmd = subcommand(sub, "approve", "allow or deny what a run asks approval for (the oldest open approval, or "
                                     "--question)", """\
  nbsubagents approve a1b2c3 allow
  nbsubagents approve a1b2c3 deny --question 7f3e""")
    cmd.add_argument("run", help="a run id or a unique prefix of one")
    cmd.add_argument("decision", choices=("allow", "deny"), help="allow or deny")
    cmd.add_argument("--question", metavar="ID", help="the approval's id (or a unique prefix): `nbsubagents show "
                                                      "RUN` lists them; default: the oldest open one")
    cmd.set_defaults(handler=approve_run)


def approve_run(args: argparse.Namespace) -> int:
    run = _talked_to(args.run)
    asked = run.approve(args.decision == "allow", question=args.question)
    echo(f"{run.id}: {'allowed' if asked['answer'] else 'denied'}: {converse.describe(asked)}")
    return 0
