"""The ``vta`` console script: the toolkit's command line, run in this Python process.

The CLI is the Rust function the ``vta`` binary runs (``vta::cli``), linked into the
extension module, so ``pip install`` of the wheel gives the same ``vta`` command with no
separate binary.
"""

from __future__ import annotations

import signal
import sys
from typing import Optional, Sequence

from . import _native


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs ``vta`` with ``argv`` (default: ``sys.argv``) and exits with its status."""
    if _native.BUILD != "full":
        # The board build has no command line; the board's is the `vta-board` binary.
        print(
            "vta: the command line is not in the board build of the package: on the board, "
            "run compiled models from Python (vta.load(...).run(x, backend=\"board\")) or "
            "with vta-board; compile on a workstation with the full wheel",
            file=sys.stderr,
        )
        sys.exit(2)
    args = list(sys.argv if argv is None else argv)
    if args:
        args[0] = "vta"
    # Ctrl-C ends the command as it ends the native binary (SIGPIPE stays ignored, as Rust's
    # runtime leaves it, so `vta ... | head` ends quietly).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    code = _native.cli_main(args or ["vta"])
    sys.exit(code)


if __name__ == "__main__":
    main()
