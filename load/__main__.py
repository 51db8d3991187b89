"""python -m load: the load and fault run (see load.run)."""

import sys

from load.run import main

if __name__ == "__main__":
    sys.exit(main())
