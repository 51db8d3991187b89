"""The tools, one module each: its declaration and its handler. `catalog.py` registers them."""
