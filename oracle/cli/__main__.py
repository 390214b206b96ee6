"""`python -m oracle.cli`: the `oracle` command."""
import sys

from . import main

sys.exit(main())
