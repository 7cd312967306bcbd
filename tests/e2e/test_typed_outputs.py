"""Typed objects back (issue 57, part 2): an output_schema class comes back as an instance, the outputs files as
objects, and a try that fails its check is asked again in the same session (max_repairs), each try kept. The real pi
and the real Claude Code against the scripted model (its ``repair:`` lines say what the child does when asked again)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import pandas as pd
import pandas.testing
import pydantic
import pytest
from test_harness_claude import claude, commit_all  # noqa: F401 (the fixture: Claude Code pointed at the scripted model)
from test_harness_codex import codex_project  # noqa: F401 (the fixture: a Codex preset on the scripted model)
from test_magics import shell  # noqa: F401 (the fixture: IPython's shell with the extension loaded)

import nbsubagents
from nbsubagents._pi.scripted_responses import chat_messages

COUNT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Summary(pydantic.BaseModel):
    rows: int
    columns: list[str]


@dataclass
class Shape:
    rows: int
    cols: int


def events(run) -> list[dict]:
    return [json.loads(line) for line in run.paths.events.read_text().splitlines()]


def tries(run) -> list[dict]:
    return [json.loads((run.dir / entry["file"]).read_text()) for entry in run.result["tries"]]


def texts(request: dict, role: str) -> list[str]:
    """The texts of one role's messages in a request the scripted model received (Chat Completions or Anthropic)."""
    out = []
    for message in request["messages"]:
        if message.get("role") == role:
            content = message["content"] or ""
            out.append(content if isinstance(content, str) else
                       "".join(str(p.get("text", p.get("input", ""))) for p in content if isinstance(p, dict)))
    return out


# -- pi --------------------------------------------------------------------------------------------------------------
def test_a_pydantic_model_comes_back_as_an_instance_also_to_a_later_reader(project):
    run = nbsubagents.run("scout", 'say: {"rows": 3, "columns": ["a", "b"]}', output_schema=Summary, show=False)

    assert run.status == "completed", run.error
    assert run.data == Summary(rows=3, columns=["a", "b"])
    assert run.record.output_type == f"{__name__}:Summary"
    assert run.result["data"] == {"rows": 3, "columns": ["a", "b"]}  # the record keeps the JSON value
    assert "tries" not in run.result and not (run.dir / "tries").exists()  # passed at once: nothing to keep
    later = nbsubagents.get_run(run.run_id)
    assert isinstance(later.data, Summary) and later.data.columns == ["a", "b"]


def test_a_dataclass_comes_back_as_an_instance(project):
    run = nbsubagents.run("scout", 'say: {"rows": 2, "cols": 5}', output_schema=Shape, show=False)
    assert run.status == "completed", run.error
    assert run.data == Shape(rows=2, cols=5)
    asked = json.loads((run.dir / "output-schema.json").read_text())
    assert asked["required"] == ["rows", "cols"] and asked["properties"]["cols"]["type"] == "integer"


CLEAN = ("import os, pandas as pd; pd.read_csv('raw.csv').dropna().reset_index(drop=True)"
         ".to_parquet(os.path.join(os.environ['NBSUBAGENTS_OUTPUTS'], 'clean.parquet'))")
CLEAN_TASK = f'run: {sys.executable} -c "{CLEAN}"\nrun: echo \'{{"dropped": 1}}\' > "$NBSUBAGENTS_OUTPUTS/stats.json"'


def test_a_cleaned_dataframe_comes_back_through_outputs(project):
    (project / "raw.csv").write_text("a,b\n1,x\n,y\n3,z\n")
    run = nbsubagents.run("scout", CLEAN_TASK, outputs={"clean": pd.DataFrame, "stats": dict}, show=False)

    assert run.status == "completed", run.error
    assert set(run.outputs) == {"clean", "stats"}
    expected = pd.read_csv(project / "raw.csv").dropna().reset_index(drop=True)
    pandas.testing.assert_frame_equal(run.outputs["clean"], expected)
    assert run.outputs["stats"] == {"dropped": 1}
    assert run.record.outputs["clean"] == {"file": "outputs/clean.parquet", "format": "parquet", "type": "DataFrame"}
    told = (run.dir / "prompt.md").read_text()
    assert str(run.dir / "outputs" / "clean.parquet") in told and "Parquet" in told  # the child was told where


def test_a_reply_that_fails_its_schema_is_repaired_on_the_second_try_in_the_same_session(project, scripted):
    task = 'say: {"n": "two"}\nrepair: say: {"n": 2}'
    run = nbsubagents.run("scout", task, output_schema=COUNT, show=False)

    assert run.status == "completed", run.error
    assert run.data == {"n": 2}
    first, second = tries(run)
    assert first["try"] == 1 and "$.n" in first["error"] and first["reply"] == '{"n": "two"}'
    assert second["try"] == 2 and second["error"] is None and second["reply"] == '{"n": 2}'
    assert [t["error"] is None for t in run.result["tries"]] == [False, True]
    # one pi, one session: the repair is a follow-up of the same conversation, which holds the first reply
    said = [e for e in events(run) if e["type"] == "session"]
    assert len(said) == 1
    repair = scripted.requests[-1]
    assert any("did not pass its check" in t and "$.n" in t for t in texts(repair, "user"))
    assert '{"n": "two"}' in texts(repair, "assistant")
    assert [e for e in events(run) if e["type"] == "user_message"] == []  # not the person's words
    assert any("Try 1 did not pass its check" in e["text"] for e in events(run) if e["type"] == "notice")
    assert run.result["conversation"] == []


def test_exhausting_max_repairs_fails_the_run_keeping_each_try(project):
    run = nbsubagents.run("scout", 'say: {"n": "two"}', output_schema=COUNT, max_repairs=1, show=False)

    assert run.status == "failed" and run.result["stopReason"] == "schema"
    assert "$.n" in run.error and "after 2 tries" in run.error
    kept = tries(run)
    assert [t["try"] for t in kept] == [1, 2] and all("$.n" in t["error"] for t in kept)
    assert not (run.dir / "tries" / "3.json").exists()


def test_a_missing_output_file_is_asked_for_again(project):
    task = 'say: finished\nrepair: run: echo \'{"n": 2}\' > "$NBSUBAGENTS_OUTPUTS/stats.json"'
    run = nbsubagents.run("scout", task, outputs={"stats": "json"}, show=False)

    assert run.status == "completed", run.error
    assert run.outputs == {"stats": {"n": 2}}
    first, second = tries(run)
    assert "'stats' (outputs/stats.json) was not written" in first["error"]
    assert first["outputs"] == {"stats": None} and second["outputs"]["stats"] > 0


def test_an_isolated_run_writes_its_outputs_inside_the_sandbox_and_nothing_else_of_its_run_folder(project):
    commit_all(project)
    task = ('run: echo \'{"n": 3}\' > "$NBSUBAGENTS_OUTPUTS/stats.json"\n'
            'run: echo forged > "$NBSUBAGENTS_OUTPUTS/../forged.json" || echo refused')
    run = nbsubagents.run("scout", task, outputs={"stats": "json"}, isolation="worktree", show=False)

    assert run.status == "completed", run.error
    assert run.result["worktree"]["contained"] is True, run.result["worktree"]
    assert run.outputs == {"stats": {"n": 3}}
    results = [e["text"] for e in events(run) if e["type"] == "tool_result"]
    assert "Read-only file system" in results[1] and not (run.dir / "forged.json").exists()


def test_bad_outputs_and_max_repairs_are_refused_before_the_run(project):
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"outputs\['clean'\] must say what the file holds"):
        nbsubagents.run("scout", "x", outputs={"clean": object}, show=False)
    with pytest.raises(nbsubagents.NbSubagentsError, match="max_repairs must be a whole number"):
        nbsubagents.run("scout", "x", output_schema=COUNT, max_repairs=-1, show=False)
    with pytest.raises(nbsubagents.NbSubagentsError, match="give output_schema or outputs with it"):
        nbsubagents.run("scout", "x", max_repairs=1, show=False)
    assert nbsubagents.runs().empty  # nothing was written


def test_the_magic_binds_the_typed_value_with_o(shell, project):  # noqa: F811
    shell.user_ns["Summary"] = Summary
    shell.run_cell('%%subagent scout --schema Summary -o summary\nsay: {"rows": 1, "columns": ["x"]}')
    assert shell.user_ns["summary"] == Summary(rows=1, columns=["x"])


# -- Claude Code -----------------------------------------------------------------------------------------------------
def test_claude_code_gives_a_pydantic_instance(claude):  # noqa: F811
    run = nbsubagents.run("scout", 'say: {"rows": 4, "columns": ["c"]}', output_schema=Summary,
                          harness="claude-code", show=False)
    assert run.status == "completed", run.error
    assert run.data == Summary(rows=4, columns=["c"])


def test_claude_code_gives_a_cleaned_dataframe_back_through_outputs(claude):  # noqa: F811
    (claude / "raw.csv").write_text("a,b\n1,x\n,y\n3,z\n")
    run = nbsubagents.run("scout", CLEAN_TASK, outputs={"clean": pd.DataFrame, "stats": dict}, harness="claude-code",
                          show=False)
    assert run.status == "completed", run.error
    expected = pd.read_csv(claude / "raw.csv").dropna().reset_index(drop=True)
    pandas.testing.assert_frame_equal(run.outputs["clean"], expected)
    assert run.outputs["stats"] == {"dropped": 1}


def test_claude_code_is_resumed_to_repair_a_reply_that_failed_its_schema(claude):  # noqa: F811
    run = nbsubagents.run("scout", 'say: {"n": "two"}\nrepair: say: {"n": 2}', output_schema=COUNT,
                          harness="claude-code", show=False)

    assert run.status == "completed", run.error
    assert run.data == {"n": 2}
    first, second = tries(run)
    assert "does not match output_schema" in first["error"] and second["error"] is None
    typed = [e for e in events(run) if e["type"] == "tool_call" and e["name"] == "StructuredOutput"]
    assert [e["args"] for e in typed] == [{"n": "two"}, {"n": 2}]  # its own check refused the first, then resumed
    assert len({e["sessionId"] for e in events(run) if e["type"] == "session"}) == 1


def test_claude_code_is_resumed_with_the_error_when_its_output_file_is_missing(claude, scripted):  # noqa: F811
    task = 'say: finished\nrepair: run: echo \'{"n": 2}\' > "$NBSUBAGENTS_OUTPUTS/stats.json"'
    run = nbsubagents.run("scout", task, outputs={"stats": "json"}, harness="claude-code", show=False)

    assert run.status == "completed", run.error
    assert run.outputs == {"stats": {"n": 2}}
    first, second = tries(run)
    assert "was not written" in first["error"] and second["error"] is None
    assert (run.dir / "tries" / "2.task.md").read_text().startswith("Your result did not pass its check")
    sessions = {e["sessionId"] for e in events(run) if e["type"] == "session"}
    assert len(sessions) == 1  # the same session, resumed
    repair = scripted.requests[-1]
    assert "finished" in texts(repair, "assistant")  # it continued the conversation of the first try


def test_claude_code_exhausting_max_repairs_keeps_each_try(claude):  # noqa: F811
    run = nbsubagents.run("scout", "say: finished", outputs={"stats": "json"}, max_repairs=1,
                          harness="claude-code", show=False)
    assert run.status == "failed" and run.result["stopReason"] == "schema"
    assert [t["try"] for t in tries(run)] == [1, 2] and "after 2 tries" in run.error


# -- Codex -----------------------------------------------------------------------------------------------------------
def test_codex_is_resumed_on_its_thread_to_repair(codex_project, scripted):  # noqa: F811
    task = 'say: {"n": "two"}\nrepair: say: {"n": 2}'
    run = nbsubagents.run("coder", task, output_schema=COUNT, max_repairs=1, show=False)

    assert run.status == "completed", run.error
    assert run.data == {"n": 2}
    first, second = tries(run)
    assert "$.n" in first["error"] and second["error"] is None
    assert len({e["sessionId"] for e in events(run) if e["type"] == "session"}) == 1  # its thread, resumed
    asked = {"messages": chat_messages(scripted.requests[-1])}
    assert '{"n": "two"}' in texts(asked, "assistant")  # the repair continued the thread of the first try
    assert texts(asked, "user")[-1].startswith("Your result did not pass its check")
