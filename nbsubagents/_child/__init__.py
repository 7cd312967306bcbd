"""What runs outside the kernel: the supervisor and what it needs (run-dir artifacts, pi's events, the
formatter, process identity) and the tmux pane's entry point.

Standard library only and nothing outside this folder: a supervisor's start-up time is run time."""

VERSION = "0.1.0"  # the package's version (``nbsubagents.__version__``), here so every band can read it
