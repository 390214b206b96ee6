"""`python -m bench.retrieval` (see bench/retrieval/__init__.py for what it measures)."""
from __future__ import annotations

import sys

from bench.retrieval.run import main

if __name__ == "__main__":
    sys.exit(main())
