#!/usr/bin/env python3
"""tests/json_get.py FILE KEY[.KEY|.INDEX...] [DEFAULT]: prints one value of a JSON file, or
of every line of a JSON-lines file (metrics.jsonl), one per line, as jq -r would (strings
bare, numbers as JSON). A missing key prints DEFAULT when given, else nothing and exit 1.
For the shell tests that run where jq is absent (the GPU machine: docs/gpu.md)."""
import json
import sys


def get(obj, path):
    for part in path.split("."):
        if isinstance(obj, list) and part.lstrip("-").isdigit() and -len(obj) <= int(part) < len(obj):
            obj = obj[int(part)]
        elif isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            raise KeyError(path)
    return obj


def show(v):
    return v if isinstance(v, str) else json.dumps(v)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.split("\n")[0], file=sys.stderr)
        return 2
    path, key = argv[0], argv[1]
    try:
        text = open(path).read()
    except OSError as e:
        print(f"json_get.py: {path}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = [json.loads(l) for l in text.splitlines() if l.strip()]
    missing = 0
    for d in docs:
        try:
            print(show(get(d, key)))
        except KeyError:
            if len(argv) == 3:
                print(argv[2])
            else:
                missing = 1
    return missing


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
