"""``python -m fabric.cli``: the ``fabric`` console script."""

import sys

from fabric.cli import main

sys.exit(main())
