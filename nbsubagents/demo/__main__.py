"""``python -m nbsubagents.demo``: the offline tour (see ``nbsubagents.demo``)."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())
