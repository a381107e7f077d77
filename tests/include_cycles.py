#!/usr/bin/env python3
"""tests/include_cycles.py — circles in the include graph of the project's file groups.

A file group is a source and its header (`store/index.c`, `store/index.h`; a header
`X_internal.h` belongs to X's group; `.c`, `.cu` and `.h` of one stem in one folder are
one group). Group A depends on group B when a file of A includes a header of B. A circle
of such dependencies between different groups means neither can be understood, built or
replaced without the other: the layout rules (tests/layout.sh) allow none.

  include_cycles.py ROOT [DIR...]   prints each circle as "a -> b -> a", exits 1 if any
  include_cycles.py --probe         checks on a made-up tree that a circle is found
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
EXTS = ('.c', '.h', '.cu', '.cpp')


def group_of(rel):
    stem = os.path.splitext(rel)[0]
    return stem[:-len('_internal')] if stem.endswith('_internal') else stem


def graph(root, dirs):
    edges = {}
    for d in dirs:
        for folder, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs[:] = [s for s in subdirs if not s.startswith(('build', '.'))]
            for name in files:
                if not name.endswith(EXTS):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding='utf-8', errors='replace') as f:
                    text = f.read()
                g = group_of(rel)
                for inc in INCLUDE.findall(text):
                    if '/' not in inc:  # a sibling by bare name
                        inc = os.path.join(os.path.dirname(rel), inc)
                    if os.path.exists(os.path.join(root, inc)) and group_of(inc) != g:
                        edges.setdefault(g, set()).add(group_of(inc))
    return edges


def circles(edges):
    """Strongly connected components of more than one group (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = set(edges) | {b for bs in edges.values() for b in bs}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def probe():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, 'x'))
        files = {'x/a.h': '#include "x/b.h"\n', 'x/b.h': '', 'x/b.c': '#include "x/a.h"\n',
                 'x/c_internal.h': '#include "x/c.h"\n', 'x/c.h': '', 'x/c.c': '#include "x/c_internal.h"\n'}
        for rel, text in files.items():
            with open(os.path.join(root, rel), 'w') as f:
                f.write(text)
        found = circles(graph(root, ['x']))
        return found == [['x/a', 'x/b']]


def main(argv):
    if argv[1:] == ['--probe']:
        ok = probe()
        print('include circles: the probe circle %s' % ('is found' if ok else 'is MISSED'))
        return 0 if ok else 1
    root, dirs = argv[1], argv[2:] or ['.']
    found = circles(graph(root, dirs))
    for comp in found:
        print('circle: ' + ' <-> '.join(comp))
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
