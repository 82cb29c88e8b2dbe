"""``python -m mopa``: the mopa command line."""

from mopa.cli.entry import main

raise SystemExit(main())
