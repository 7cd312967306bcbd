"""The kernel's side of a run: task spec, preparing a run dir, the ``Run`` handle, launchers, settling,
the foreground loop, the watcher and reconciling.

Named for a run's life rather than ``runs``: ``nbsubagents.runs`` is the public ``runs()`` function, and a
subpackage of that name would shadow it once imported.
"""
