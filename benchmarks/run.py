"""Run every benchmark module in this folder (`make bench`); each prints its own table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def main() -> int:
    """Import each bench_*.py here, in name order, and call its main()."""
    for path in sorted(Path(__file__).parent.glob("bench_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        # Registered before it runs, as an import would: dataclasses look the module up.
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        print(f"== {path.stem}", flush=True)
        module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
