import os
import sys
from contextlib import suppress

from analyzer.cli.entry import main
from analyzer.errors import Interrupted

try:
    main()
except SystemExit as done:
    if done.code != Interrupted.exit_code:
        raise
    # Ctrl-C, said in its line: exit 130, as the command line documents. (Under `python -m`,
    # CPython exits by SIGINT instead once a KeyboardInterrupt was raised in code that exec()
    # ran - a dataclass an import was creating when Ctrl-C came - even a caught one; the store
    # and the files are closed by now, so nothing is lost in leaving at once.)
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(Interrupted.exit_code)
