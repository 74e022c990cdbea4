"""`python -m tilec ...`: the `tilec` command (tilec/cli.py) without the installed script."""

import sys

from tilec.cli import main

sys.exit(main())
