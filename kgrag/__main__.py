"""``python -m kgrag`` runs the command line."""

import sys

from kgrag.cli.main import main

sys.exit(main())
