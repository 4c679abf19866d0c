"""``python -m rlstack``: the same as the ``rlstack`` command."""

import sys

from rlstack.cli import main

sys.exit(main())
