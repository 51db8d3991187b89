"""python -m load: the load and fault run (see load.run)."""

import sys

from load.run import main

sys.exit(main())
