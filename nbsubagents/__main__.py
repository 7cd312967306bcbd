"""``python -m nbsubagents``: the console script (``nbsubagents.cli``)."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
