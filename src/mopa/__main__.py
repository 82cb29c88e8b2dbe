"""``python -m mopa``: the mopa command line."""

from mopa.cli.main import main

raise SystemExit(main())
