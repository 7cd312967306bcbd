"""``python -m nbsubagents``: the console script (``nbsubagents._cli``)."""

from __future__ import annotations

import sys

from ._cli import main

sys.exit(main())
