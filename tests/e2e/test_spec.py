"""``TaskSpec`` is the one declaration of the run options: a field declared only there reaches every face.

The faces (``run``/``start``, ``run_parallel`` and ``%%subagents``, ``%subagent``'s flags and completion,
``experiment()`` and ``%%subagent_experiment``) derive their options from the schema when they are used, or, for
the magic's flags, when the magics module loads; so the test declares a new field, reloads the magics, and
checks that the field's value arrives in the ``TaskSpec`` each face hands to ``prepare``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re

import pytest
from IPython.core.error import UsageError

import nbsubagents
from nbsubagents import _magics as magics
from nbsubagents._lifecycle import prepare as preparing
from nbsubagents._lifecycle import spec
from nbsubagents._sweeps import magic as sweep_magic

from test_magics import completions, shell  # noqa: F401 (a fixture)


@pytest.fixture
def temperature(monkeypatch):
    """A new run option, ``temperature``, declared on TaskSpec and nowhere else; yields what prepare() saw."""

    @dataclasses.dataclass
    class WithTemperature(spec.TaskSpec):
        temperature: float | None = spec.option("sampling temperature", parse=float, metavar="T", column=True)

    monkeypatch.setattr(spec, "TaskSpec", WithTemperature)
    seen: list[object] = []
    real = preparing.prepare

    def recording(task_spec, **how):
        seen.append(getattr(task_spec, "temperature", "no such field"))
        return real(task_spec, **how)

    monkeypatch.setattr(preparing, "prepare", recording)
    importlib.reload(magics)  # %subagent's flags are made when the magics module loads
    yield seen
    monkeypatch.undo()
    importlib.reload(magics)


def test_a_field_declared_only_on_taskspec_reaches_every_face(shell, temperature, project):  # noqa: F811
    magics.load_ipython_extension(shell)  # the reloaded magics, with the new flag

    assert "temperature" in spec.task_keys() and "--temperature" in shell.find_line_magic("subagent").__doc__
    assert "--temperature" in completions(shell, "%subagent scout --temp")

    run = shell.run_line_magic("subagent", "scout --temperature 0.5 read README.md")  # the magic
    assert run.status == "completed" and temperature[-1] == 0.5
    bg = shell.run_line_magic("subagent", "scout --bg --temperature 0.25 read README.md")
    assert temperature[-1] == 0.25
    bg.wait(60)

    nbsubagents.run("scout", "read README.md", temperature=0.75, show=False)  # the API
    assert temperature[-1] == 0.75
    nbsubagents.start("scout", "read README.md", temperature=0.8, show=False).wait(60)
    assert temperature[-1] == 0.8
    shell.run_cell_magic("subagents", "", "- preset: scout\n  task: read README.md\n  temperature: 0.125\n")
    assert temperature[-1] == 0.125  # %%subagents YAML, i.e. run_parallel's task mappings

    nbsubagents.experiment("warm", tasks=["read README.md"], presets="scout", temperature=0.9, show=False)
    assert temperature[-1] == 0.9  # experiment()'s options for every run
    nbsubagents.experiment("cells", tasks=[{"task": "read README.md", "temperature": 0.3}], presets="scout",
                           show=False)
    assert temperature[-1] == 0.3  # an experiment task's own column
    assert "temperature" in sweep_magic.keys()
    shell.run_cell_magic("subagent_experiment", "magic-warm",
                         "tasks: [read README.md]\npresets: [scout]\ntemperature: 0.6\n")
    assert temperature[-1] == 0.6  # %%subagent_experiment's keys


def test_an_unknown_option_names_the_known_ones_with_a_guess(shell, project):  # noqa: F811
    with pytest.raises(TypeError, match=r"run\(\): unknown keyword argument\(s\) modle \(did you mean model\?\); "
                                        r"known ones are model, cwd"):
        nbsubagents.run("scout", "read README.md", modle="demo/scripted")
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"start\(\): unknown keyword argument\(s\) shwo "
                                                           r"\(did you mean show\?\)"):
        nbsubagents.start("scout", "read README.md", shwo=False)
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"unknown option\(s\) max_turn \(did you mean max_turns"):
        nbsubagents.experiment("x", tasks=["ls"], presets="scout", max_turn=3)
    with pytest.raises(UsageError, match="unrecognized arguments: --max-turnz"):
        shell.run_line_magic("subagent", "scout --max-turnz 3 ls")


def test_signatures_and_help_list_every_option_of_their_face():
    """run(), start() and experiment() name each option of their face as written (what type checkers and IDEs
    read), with TaskSpec's type, and document it; a stray keyword lands in ``**unknown: Never``."""
    types = {f.name: f.type for f in dataclasses.fields(spec.TaskSpec)}
    for func, face in ((nbsubagents.run, "call"), (nbsubagents.start, "call"), (nbsubagents.experiment, "sweep")):
        params = inspect.signature(func).parameters
        declared = [name for name, p in params.items() if name in types and p.kind is p.KEYWORD_ONLY]
        assert declared == [opt.name for opt in spec.options(face)], func.__name__
        for name in declared:
            assert params[name].kind is inspect.Parameter.KEYWORD_ONLY and params[name].default is None
            assert params[name].annotation == types[name], (func.__name__, name)
        assert [(p.name, p.annotation) for p in params.values() if p.kind is p.VAR_KEYWORD] == [("unknown", "Never")]
    documented = nbsubagents.run.__doc__.partition("Parameters\n")[2]
    assert all(re.search(rf"\b{opt.name}\b", documented) for opt in spec.options("call"))
    assert all(opt.name in nbsubagents.experiment.__doc__ for opt in spec.options("sweep"))
    flags = magics.SubagentMagics.subagent.__doc__
    assert all(opt.spelling in flags and opt.help in " ".join(flags.split()) for opt in spec.options("magic"))


def test_each_face_takes_what_the_schema_says():
    names = {face: [o.name for o in spec.options(face)] for face in spec.FACES}
    assert spec.task_keys() == spec.TASK_KEYS == tuple(f.name for f in dataclasses.fields(spec.TaskSpec))
    assert "output_schema" in names["call"] and "output_schema" not in names["magic"]  # a dict is no flag
    assert "model" not in names["sweep"] and "tags" in names["sweep"] and "tags" not in names["call"]
    assert names["column"] == ["cwd", "timeout", "files", "inputs"]
    assert [o.spelling for o in spec.options("magic")][:4] == ["--model", "--cwd", "--timeout", "--name"]


def test_one_task_given_to_run_parallel_shows_the_list_it_should_be(project):
    """Issue 55: a dict given to run_parallel was taken as its keys, and the error showed
    ``{'preset': 'scout', 'task': 'preset'}``; it now names the dict and shows it in a list."""
    one = {"preset": "scout", "task": "ls ."}
    with pytest.raises(nbsubagents.NbSubagentsError) as raised:
        nbsubagents.run_parallel(one)
    message = str(raised.value)
    assert "got one dict" in message and f"[{one!r}]" in message and "'task': 'preset'" not in message
    with pytest.raises(nbsubagents.NbSubagentsError, match=r"got one string: pass \[\{'preset': 'scout', 'task': 'ls \.'\}\]"):
        nbsubagents.run_parallel("ls .")
    with pytest.raises(nbsubagents.NbSubagentsError, match="got one task"):
        nbsubagents.run_parallel(spec.TaskSpec(preset="scout", task="ls ."))
    assert not list((project / ".pi" / "subagents" / "runs").glob("*"))  # refused before anything was written
