"""Regenerate the format corpus (``make corpus``): every ``tests/corpus/<name>/gen/generate.py``, or
the names given. Each runs a real launcher with real libraries and rewrites ``out/``, ``truth/``,
``README.md``; like the scenario generators they need root (namespaces), ``faketime`` and ``unshare``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.scenarios.generate import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], Path(__file__).resolve().parent))
