"""The interpreter's `sys.prefix`, alone on a line: which environment it belongs to
(environment/target.py), asked before the environment is probed."""

import sys

if __name__ == "__main__":
    print(sys.prefix)
