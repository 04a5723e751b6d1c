"""``python -m kgrag`` runs the command line."""

import sys

from kgrag.cli import main

sys.exit(main())
