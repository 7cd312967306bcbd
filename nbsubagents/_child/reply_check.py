"""A reply checked against its output schema, in a process of its own: ``python -m nbsubagents._child.reply_check``.

The supervisor writes ``{"text": reply, "schema": schema}`` as JSON on stdin and reads one JSON line on stdout,
``{"data": value, "error": null}`` or ``{"data": null, "error": "The reply does not match ..."}``. A reply nested
thousands deep, or a schema ``pattern`` that backtracks catastrophically (Python's ``re`` has no timeout), can
only hang or break this process: the supervisor ends it under the run's timeout, cancel and a limit of its own.
"""

from __future__ import annotations

import json
import sys

from .output_schema import check_reply


def main() -> int:
    request = json.loads(sys.stdin.buffer.read())
    data, error = check_reply(request["text"], request["schema"])
    sys.stdout.write(json.dumps({"data": data, "error": error}, ensure_ascii=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
