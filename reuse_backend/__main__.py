"""``python -m reuse_backend``: the cache command line (see reuse_backend/cli.py)."""
import sys

from .cli import main

sys.exit(main())
