#!/usr/bin/env python3
"""tests/header_lists.py — the lists that headers and docs keep, checked against the code.

Where a header (or its doc) lists what the code has, the two are compared mechanically:
  - the kernel entries: the rows of kernels/entries.h against the members the backends'
    tables set (kernels/cpu/backend.c `.NAME = `, kernels/cuda/*.cu `b->NAME = `: every one
    a row), the CPU fp32 table (it has every row with a class: an entry lands on the CPU
    first), the profiler's classes (kernels/profile.h KERNELS_PROFILE_*, or NONE) and
    docs/kernels.md "Entries and layouts" (every row named; `x_forward/backward` names both);
  - the shared argument checks (kernels/check.h, and kernels/check_attention.h for the
    attention entries): each kernels_check_NAME that a .c defines is declared in its .h and
    the other way round; NAME is a row of entries.h (or one of SHARED_CHECKS below, the
    checks several entries share, whose entries are rows),
    and every backend's definition of that entry (kernels/cpu: kcpu_NAME or cpu_NAME,
    kernels/cuda: kcu_NAME; the CPU's [act] adapters f32_NAME and kbf_NAME count too) calls
    it (a shared one: some source of each backend) and checks nothing of its own with the
    backends' NULL and size macros (KCPU_NEED/KCPU_DIM, KCU_NEED/KCU_DIM); every row has a
    check there unless EXEMPT below names it with the reason, so a new entry's check lands
    in kernels/check.c (or check_attention.c);
  - the DiT's parameter tensors: the list in model/dit.h's comment against the names
    model/params.c gives them (add_tensor, add_linear: NAME.weight and NAME.bias; the
    blocks' `BLK("s")` under their prefix), both ways ({i} for the block index, {a,b} for
    alternatives, a leading `.bias` for the previous name's stem).

  header_lists.py ROOT      prints each mismatch, exits 1 if any
  header_lists.py --probe   checks on made-up files that a mismatch is found
"""
import os
import re
import sys
import tempfile

ROW = re.compile(r'^KERNELS_ENTRY\((\w+), (\w+), (\w+),', re.M)
ACT = re.compile(r'^KERNELS_ENTRY\(\w+, (\w+), \w+, ACT,', re.M)
FIELDS = {'name', 'ctx', 'act_dtype', 'device_memory', 'stream'}  # not entries


def read(root, rel):
    with open(os.path.join(root, rel), encoding='utf-8') as f:
        return f.read()


def entry_problems(root):
    out = []
    rows = {name: cls for _, name, cls in ROW.findall(read(root, 'kernels/entries.h'))}
    if not rows:
        return ['kernels/entries.h: no KERNELS_ENTRY rows']
    classes = set(re.findall(r'\bKERNELS_PROFILE_(\w+)\b', read(root, 'kernels/profile.h')))
    classes.discard('N_CLASSES')
    for name, cls in rows.items():
        if cls != 'NONE' and cls not in classes:
            out.append('kernels/entries.h: %s has class %s, not one of kernels/profile.h '
                       '(%s) or NONE' % (name, cls, ', '.join(sorted(classes))))
    cpu = read(root, 'kernels/cpu/backend.c')
    tables = [('kernels/cpu/backend.c', re.findall(r'^\s*\.(\w+) = ', cpu, re.M))]
    cuda_dir = os.path.join(root, 'kernels/cuda')
    for fn in sorted(os.listdir(cuda_dir)) if os.path.isdir(cuda_dir) else []:
        if fn.endswith('.cu'):
            rel = 'kernels/cuda/' + fn
            # not the X-macro rows (#define ... b->NAME = kcu_##NAME: set from entries.h)
            code = re.sub(r'^#define .*$', '', read(root, rel), flags=re.M)
            tables.append((rel, re.findall(r'\bb->(\w+) = ', code)))
    for rel, members in tables:
        for m in members:
            if m not in FIELDS and m not in rows:
                out.append('%s sets %s, which is no row of kernels/entries.h' % (rel, m))
    # the fp32 table: its initializer and the shared entries' macro it includes
    t = re.search(r'static (?:const )?kernels_backend cpu_backend = \{(.*?)\n\};', cpu, re.S)
    s = re.search(r'#define KCPU_SHARED_ENTRIES(.*?)\n\n', cpu, re.S)
    fp32 = set(re.findall(r'\.(\w+) = ', (t.group(1) if t else '') + (s.group(1) if s else '')))
    # the ACT rows the table makes from the list (KCPU_ROW_ACT): each needs its f32_NAME
    if 'cpu_backend.NAME = f32_##NAME;' in cpu:
        fp32.update(n for n in ACT.findall(read(root, 'kernels/entries.h'))
                    if re.search(r'\bf32_%s\(' % n, cpu))
    for name, cls in rows.items():
        if cls != 'NONE' and name not in fp32:
            out.append('kernels/cpu/backend.c: the cpu table lacks %s (an entry lands on the '
                       'CPU fp32 backend first)' % name)
    doc = read(root, 'docs/kernels.md')
    sec = re.search(r'^## Entries and layouts\n(.*?)^## ', doc, re.S | re.M)
    named = set()
    for a, b in re.findall(r'`(\w+?)(?:_(forward)/backward)?[`(]', sec.group(1) if sec else ''):
        if b:
            named.update((a + '_forward', a + '_backward'))
        else:
            named.add(a)
    for name in rows:
        if name not in named:
            out.append('docs/kernels.md "Entries and layouts" does not name %s' % name)
    return out


# Checks named for what several entries share, not for one entry, and those entries.
SHARED_CHECKS = {
    'activation_forward': ('gelu_forward', 'silu_forward'),
    'activation_backward': ('gelu_backward', 'silu_backward'),
}


# Rows without a kernels_check_NAME yet, and why; a row listed here that has one is an
# error (take it off the list).
EXEMPT = {
    'free': 'nothing to check: NULL is ignored',
    'sync': 'no arguments',
    'reserve': 'its only check is of the backend\'s state (CUDA: an arena made already)',
    'memory_stats': 'nothing to check: every pointer may be NULL',
    'graph_begin': 'optional, CUDA only (the CPU leaves it NULL): its checks are of the '
                   'backend\'s recording state',
    'graph_end': 'optional, CUDA only: its checks are of the backend\'s recording state',
    'graph_launch': 'optional, CUDA only: no second backend to agree with',
    'graph_free': 'optional, CUDA only: nothing to check (NULL is ignored)',
    'path_stats': 'optional, CUDA only: no second backend to agree with',
}

# The backends' own argument macros: an entry with a shared check uses none of them (what
# is the backend's own, e.g. a dtype it lacks or a device limit, it reports with err_set).
LOCAL_CHECK = re.compile(r'\b(KCPU_NEED|KCPU_DIM|KCU_NEED|KCU_DIM)\(')


def backend_sources(root, rel, ext):
    d = os.path.join(root, rel)
    return [(rel + '/' + fn, read(root, rel + '/' + fn))
            for fn in (sorted(os.listdir(d)) if os.path.isdir(d) else []) if fn.endswith(ext)]


def definitions(sources, prefixes):
    """{name: body} of the functions `tsr_status PREFIXname(...) {...}` of the sources."""
    out = {}
    for _, text in sources:
        for m in re.finditer(r'^(?:extern "C" )?(?:static )?tsr_status (%s)(\w+)\(' % prefixes,
                             text, re.M):
            end = text.find('\n}', m.end())
            out[m.group(2)] = out.get(m.group(2), '') + text[m.end():end]
    return out


# The shared checks' files, each a .c and the .h that is its contract.
CHECK_FILES = ('kernels/check', 'kernels/check_attention')


def check_problems(root):
    if not os.path.exists(os.path.join(root, 'kernels/check.c')):
        return []
    fn = re.compile(r'^tsr_status kernels_check_(\w+)\(', re.M)
    defined, declared, out = set(), set(), []
    for stem in CHECK_FILES:
        if not os.path.exists(os.path.join(root, stem + '.c')):
            continue
        d = set(fn.findall(read(root, stem + '.c')))
        h = set(fn.findall(read(root, stem + '.h')))
        out += ['%s.c defines kernels_check_%s, which %s.h does not declare' % (stem, n, stem)
                for n in sorted(d - h)]
        out += ['%s.h declares kernels_check_%s, which %s.c does not define' % (stem, n, stem)
                for n in sorted(h - d)]
        defined |= d
        declared |= h
    rows = set(name for _, name, _ in ROW.findall(read(root, 'kernels/entries.h')))
    backends = [('kernels/cpu', backend_sources(root, 'kernels/cpu', ('.c', '.h')),
                 'kcpu_|cpu_|f32_|kbf_'),
                ('kernels/cuda', backend_sources(root, 'kernels/cuda', ('.cu', '.h')), 'kcu_')]
    for n in sorted(defined & declared):
        call = 'kernels_check_%s(' % n
        if n in SHARED_CHECKS:
            out += ['tests/header_lists.py: kernels_check_%s serves %s, which is no row of '
                    'kernels/entries.h' % (n, e) for e in SHARED_CHECKS[n] if e not in rows]
            for rel, sources, _ in backends:
                if sources and not any(call in text for _, text in sources):
                    out.append('%s: no source calls kernels_check_%s' % (rel, n))
            continue
        if n not in rows:
            out.append('kernels/check.c: kernels_check_%s is named for no row of '
                       'kernels/entries.h (name it after its entry, or list it in '
                       'tests/header_lists.py SHARED_CHECKS)' % n)
            continue
        for rel, sources, prefixes in backends:
            if not sources:
                continue
            body = definitions(sources, prefixes).get(n)
            if body is None:
                out.append('%s defines no %s entry, which kernels_check_%s is for' % (rel, n, n))
            elif call not in body:
                out.append('%s: the %s entry does not call kernels_check_%s' % (rel, n, n))
            elif LOCAL_CHECK.search(body):
                out.append('%s: the %s entry still checks with %s (its check belongs in '
                           'kernels_check_%s, kernels/check.c)'
                           % (rel, n, LOCAL_CHECK.search(body).group(1), n))
    shared = set(e for n in defined & SHARED_CHECKS.keys() for e in SHARED_CHECKS[n])
    for name in sorted(rows):
        has = name in defined or name in shared
        if not has and name not in EXEMPT:
            out.append('kernels/entries.h: %s has no kernels_check_%s in kernels/check.c (its '
                       'argument checks go there, docs/kernels.md "Adding an entry"; or list '
                       'it in tests/header_lists.py EXEMPT with the reason)' % (name, name))
        elif has and name in EXEMPT:
            out.append('tests/header_lists.py: EXEMPT lists %s, which has its check in '
                       'kernels/check.c (take it off)' % name)
    out += ['tests/header_lists.py: EXEMPT lists %s, which is no row of kernels/entries.h' % n
            for n in sorted(set(EXEMPT) - rows)]
    return out


def expand(tok):
    m = re.search(r'\{([^{}]*)\}', tok)
    if not m:
        return [tok]
    res = []
    for alt in m.group(1).split(','):
        res += expand(tok[:m.start()] + alt + tok[m.end():])
    return res


def header_tensors(text):
    m = re.search(r'^// Parameter tensors.*?\n(.*?)^// All parameters live', text, re.S | re.M)
    body = ' '.join(line[2:] for line in (m.group(1) if m else '').split('\n'))
    body = body.replace('{i}', 'I')
    names, stem = set(), None
    for tok in re.findall(r'[a-zI.{][a-z0-9_.{},I]*', body):
        tok = tok.rstrip('.,;')
        if tok.startswith('.'):
            if stem is None:
                continue
            tok = stem + tok
        elif '.' in tok:
            stem = tok.rsplit('.', 1)[0]
        else:
            continue
        for t in expand(tok):
            if re.search(r'\.(weight|bias|modulation)$', t):
                names.add(t)
    return names


def code_tensors(text):
    names, prefix = set(), ''
    for line in text.split('\n'):
        d = re.search(r'#define BLK\(s\) .*?"([^"]*)%s"', line)
        if d:
            prefix = d.group(1).replace('%d', 'I')
        for kind, blk, lit in re.findall(r'add_(linear|tensor)\(m, (?:BLK\("([^"]*)"\)|"([^"]*)")',
                                         line):
            n = prefix + blk if blk else lit
            names.update((n + '.weight', n + '.bias') if kind == 'linear' else (n,))
    return names


def tensor_problems(root):
    have = code_tensors(read(root, 'model/params.c'))
    said = header_tensors(read(root, 'model/dit.h'))
    if not have:
        return ['model/params.c: no tensor names found']
    shown = lambda n: n.replace('I', '{i}')
    out = ['model/dit.h does not list the tensor %s (model/params.c makes it)' % shown(n)
           for n in sorted(have - said)]
    out += ['model/dit.h lists the tensor %s, which model/params.c does not make' % shown(n)
            for n in sorted(said - have)]
    return out


def problems(root):
    return entry_problems(root) + check_problems(root) + tensor_problems(root)


def probe():
    """A row no table has, a table member no row has, a check no entry calls, a check named
    for no entry, an entry that checks with a backend's own macro, a row without a check
    and an EXEMPT name that is no row, an unlisted and a stale tensor."""
    files = {
        'kernels/entries.h': 'KERNELS_ENTRY(tsr_status, gemm, GEMM,\nKERNELS_ENTRY(tsr_status, '
                             'lost, GEMM,\nKERNELS_ENTRY(tsr_status, fill, GEMM,\n',
        'kernels/profile.h': 'KERNELS_PROFILE_GEMM,\n',
        'kernels/cpu/backend.c': 'static kernels_backend cpu_backend = {\n    .name = "cpu",\n'
                                 '    .gemm = f,\n    .fill = h,\n    .stray = g,\n};\n',
        'docs/kernels.md': '## Entries and layouts\n| `gemm(a)` | `lost` | `fill` |\n## Next\n',
        'kernels/check.h': 'tsr_status kernels_check_gemm(int m);\n'
                           'tsr_status kernels_check_fill(int n);\n'
                           'tsr_status kernels_check_stale(int m);\n',
        'kernels/check.c': 'tsr_status kernels_check_gemm(int m) {\n  return TSR_OK;\n}\n'
                           'tsr_status kernels_check_fill(int n) {\n  return TSR_OK;\n}\n'
                           'tsr_status kernels_check_stale(int m) {\n  return TSR_OK;\n}\n',
        'kernels/check_attention.h': '',
        'kernels/check_attention.c': 'tsr_status kernels_check_extra(int n) {\n  return 0;\n}\n',
        'kernels/cpu/gemm.c': 'tsr_status kcpu_gemm(kb_t *kb, int m) {\n  return TSR_OK;\n}\n'
                              'tsr_status kcpu_fill(kb_t *kb, float *x, int n) {\n'
                              '  TSR_TRY(kernels_check_fill(n));\n  KCPU_NEED("fill", x);\n}\n',
        'model/params.c': '  m->x = add_linear(m, "x_embed", 1, 2, 0);\n'
                          '#define BLK(s) (snprintf(n, sizeof n, "blocks.%d.%s", i, (s)), n)\n'
                          '  add_tensor(m, BLK("q_norm.weight"), 1, 0, 0);\n',
        'model/dit.h': '// Parameter tensors (names):\n//   x_embed.weight (P, D), .bias (D)\n'
                       '//   blocks.{i}.{q,k}_norm.weight (Dh)\n// All parameters live here\n',
    }
    with tempfile.TemporaryDirectory() as d:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), 'w', encoding='utf-8') as f:
                f.write(text)
        got = '\n'.join(problems(d))
    want = ['sets stray', 'lacks lost', 'gemm entry does not call kernels_check_gemm',
            'kernels_check_stale is named for no row',
            'fill entry still checks with KCPU_NEED', 'lost has no kernels_check_lost',
            'EXEMPT lists sync, which is no row',
            'check_attention.c defines kernels_check_extra, which kernels/check_attention.h',
            'blocks.{i}.k_norm.weight, which model/params.c does not']
    missing = [w for w in want if w not in got]
    unwanted = [w for w in ('x_embed', 'q_norm', 'does not name', 'gemm has no kernels_check',
                            'fill has no kernels_check') if w in got]
    if missing or unwanted:
        print('header_lists.py --probe: missed %s, wrongly found %s in:\n%s'
              % (missing, unwanted, got))
        return 1
    return 0


def main(argv):
    if argv[1:] == ['--probe']:
        return probe()
    if len(argv) != 2:
        print(__doc__)
        return 2
    found = problems(argv[1])
    for p in found:
        print(p)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
