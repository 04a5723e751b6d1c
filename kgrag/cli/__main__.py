"""``python -m kgrag.cli`` runs the command line, as ``python -m kgrag`` does."""

import sys

from kgrag.cli.main import main

sys.exit(main())
