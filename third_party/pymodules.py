"""Says whether this Python has the modules named on the command line.

    python3 -I third_party/pymodules.py MODULE...

For each module it prints `MODULE VERSION FILE` and exits 0 when every one is
a real installed package: it imports, its __file__ is a file (a folder named
like the module on sys.path imports as a namespace package with no file), and
it has a version. Otherwise it prints `MODULE: why` to stderr and exits 1.

Run it in isolated mode (-I) from a folder that holds no module folders (deps.sh
and internal/testenv use /): -I keeps the working directory, the script's
folder, PYTHONPATH and user site-packages off sys.path, so that a folder such
as the repository's own torch/ cannot pass for PyTorch. The tests run their
Python the same way, so what this finds is what they get.
"""

import importlib
import os
import sys


def check(name):
    try:
        module = importlib.import_module(name)
    except Exception as e:  # a broken install raises more than ImportError
        return None, "%s: cannot be imported: %s: %s" % (name, type(e).__name__, e)
    path = getattr(module, "__file__", None)
    if not path or not os.path.isfile(path):
        return None, "%s: %r is not an installed package (no __file__; a folder on sys.path?)" % (name, module)
    version = getattr(module, "__version__", None)
    if not version:
        return None, "%s: %s has no __version__" % (name, path)
    return "%s %s %s" % (name, version, path), None


def main(names):
    if not names:
        print("usage: pymodules.py MODULE...", file=sys.stderr)
        return 2
    failed = False
    for name in names:
        line, why = check(name)
        if why:
            print(why, file=sys.stderr)
            failed = True
        else:
            print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
