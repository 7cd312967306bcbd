"""Static renderings of runs: text, HTML and Markdown strings, no widgets and no IPython.

``panel_state`` is a run panel's state and ``panel_record`` its static record (what a finished run shows, what a
saved notebook keeps); ``reports`` writes a report you can send. Views take run-like objects (duck typing) and
never import ``lifecycle/``: they sit below it, so a ``Run`` can render itself downward (``Run.report``). They hold
no live state (no threads, no locks): the live panels of ``ui/`` serialize their calls."""
