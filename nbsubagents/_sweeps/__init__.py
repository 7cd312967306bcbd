"""Delegation experiments: a sweep's plan and runs (``experiment``), its scorers (``scorers``), its frames,
comparisons, plots and MLflow export (``views``), each run as a trace (``traces``: MLflow, OpenTelemetry JSON),
the report to send (``report``) and the ``%%subagent_experiment`` magic (``magic``).

Above ``lifecycle/`` and ``ui/``: an experiment launches runs like ``run_parallel`` and shows them with the
same panels. Named ``sweeps`` because ``nbsubagents.experiment`` and ``nbsubagents.experiments`` are public
functions, which a subpackage of either name would shadow once imported.
"""
