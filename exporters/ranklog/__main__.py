"""``python -m ranklog`` is the ``ranklog`` command."""

import sys

from .cli import main

sys.exit(main())
