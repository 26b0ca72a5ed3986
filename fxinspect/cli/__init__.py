"""The command line, ``fxinspect MODULE:CALLABLE --input-shape 1,3,224,224`` (``python -m fxinspect``).

:mod:`.main` parses, checks and runs an analysis; :mod:`.flags` makes a flag of every
analysis option :class:`~fxinspect.options.Options` declares one for, and reads the
record back from the parsed flags; :mod:`.planning` adds ``--sweep``, ``--max-batch`` and
``--checkpoint-plan``.
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
