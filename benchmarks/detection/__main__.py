"""``python -m benchmarks.detection [table|real|scan] ...``: the detection benchmarks.

``table`` (the default) scores every config on the repository's labelled
stretches (``run.py``); ``real`` scores the labelled stretches of real public
transcripts, per half (``real.py``); ``scan`` lists repetitive stretches of a
folder of transcripts for labelling (``scan.py``).
"""

import sys

from benchmarks.detection import real, run, scan

_COMMANDS = {"table": run.main, "real": real.main, "scan": scan.main}

argv = sys.argv[1:]
command = argv.pop(0) if argv and argv[0] in _COMMANDS else "table"
sys.exit(_COMMANDS[command](argv))
