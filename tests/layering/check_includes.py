#!/usr/bin/env python3
"""Checks that the sources include one another only down the subsystem layers.

Every `#include` of a project header under src/ and capi/ is checked against
ALLOWED, the table docs/architecture.md (section "Layering") describes. A
subsystem may include its own headers, the public header and the subsystems
its entry lists; anything else is reported with file, line and include, and
the script exits 1. A new dependency is a decision: add it to ALLOWED (which
must stay free of cycles) and to the table in the documentation.

    check_includes.py [--root DIR]   check the tree (default: this repository)
    check_includes.py --self-test    check the checker on small trees it writes
"""

import argparse
import os
import re
import sys
import tempfile

# Who may include whom, lowest layer first. The public header
# (include/moestream.h) is open to everyone: its enums and status codes are the
# library's vocabulary.
ALLOWED = {
    # Errors, logging, files, threads, NUMA buffers, counters.
    'common': set(),
    # The GGUF container, the compute kernels and the read backends know
    # nothing of one another.
    'gguf': {'common'},
    'kernels': {'common'},
    'io': {'common'},
    # Text to ids, from the file's metadata.
    'tokenizer': {'common', 'gguf'},
    # Hyperparameters, bound weights (and where the experts lie), building
    # blocks of the forward pass.
    'model': {'common', 'gguf', 'kernels'},
    # Where expert bytes come from: mapping, cache, streaming, traces.
    'experts': {'common', 'gguf', 'io', 'model'},
    # The context and the forward pass, which put the model and an expert
    # source together.
    'runtime': {'common', 'gguf', 'kernels', 'io', 'model', 'experts'},
    # The C API: contexts, and the calls that work on files without one
    # (inspect, pack, trace replay, read-log replay, generate, kernels).
    'capi': {'common', 'gguf', 'kernels', 'io', 'tokenizer', 'model', 'experts', 'runtime'},
    # The tool is a client of the shared library: the public header and its
    # own files only (its include path holds nothing else).
    'cli': set(),
}

PUBLIC_HEADER = 'moestream.h'
SOURCE_SUFFIXES = ('.h', '.hpp', '.c', '.cpp', '.inc')
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def check_table_is_acyclic(table):
    """Raises if ALLOWED lets two subsystems reach each other."""
    state = {}

    def visit(node, path):
        if state.get(node) == 'done':
            return
        if state.get(node) == 'open':
            raise SystemExit('ALLOWED has a cycle: ' + ' -> '.join(path + [node]))
        state[node] = 'open'
        for dep in sorted(table[node]):
            if dep not in table:
                raise SystemExit(f'ALLOWED: {node} lists unknown subsystem {dep}')
            visit(dep, path + [node])
        state[node] = 'done'

    for node in sorted(table):
        visit(node, [])


def subsystem_of(rel):
    """'src/model/archs/x.cpp' -> 'model', 'capi/x.cpp' -> 'capi'."""
    parts = rel.split('/')
    if parts[0] == 'capi':
        return 'capi'
    return parts[1]


def source_files(root):
    for top in ('src', 'capi'):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SOURCE_SUFFIXES):
                    path = os.path.join(dirpath, name)
                    yield path, os.path.relpath(path, root).replace(os.sep, '/')


def violations(root, table):
    """Yields 'file:line: message' for every include the table does not allow."""
    for path, rel in source_files(root):
        sub = subsystem_of(rel)
        if sub not in table:
            yield f'{rel}: directory {sub!r} is not a subsystem of the layering table'
            continue
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = f.readlines()
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            quote, inc = m.groups()
            closing = '>' if quote == '<' else '"'
            where = f'{rel}:{number}: #include {quote}{inc}{closing}'
            if inc == PUBLIC_HEADER:
                continue
            if '/' not in inc:
                # A bare quoted name is a file beside the includer (cli and
                # capi keep their own headers so); anything else is a project
                # header reached through an include path it should not use.
                if quote == '"' and not os.path.exists(os.path.join(os.path.dirname(path), inc)):
                    yield f'{where}: no such file beside it (project headers are included as "subsystem/file")'
                continue
            target = inc.split('/')[0]
            if quote == '<' and not os.path.exists(os.path.join(root, 'src', inc)):
                continue  # a system or third-party header
            if target == sub:
                continue
            if target not in table:
                yield f'{where}: {target!r} is not a subsystem of the layering table'
            elif target not in table[sub]:
                may = ', '.join(sorted(table[sub])) or 'only its own files and ' + PUBLIC_HEADER
                yield f'{where}: {sub} must not include {target} ({sub} may include: {may})'


def run(root, table, out):
    check_table_is_acyclic(table)
    found = list(violations(root, table))
    for v in found:
        print(v, file=out)
    if found:
        print(f'{len(found)} include(s) against the layering of docs/architecture.md', file=out)
    return 1 if found else 0


def self_test():
    """The checker must pass a clean tree and name every wrong include of a bad one."""
    def write(root, rel, text):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)

    clean = {
        'src/common/error.hpp': '#include "moestream.h"\n#include <vector>\n',
        'src/model/model.hpp': '#include "common/error.hpp"\n#include "model/weights.hpp"\n',
        'src/model/weights.hpp': '',
        'src/model/archs/llama.cpp': '#include "model/model.hpp"\n',
        'src/experts/source.hpp': '#include "model/model.hpp"\n',
        'src/cli/main.cpp': '#include "moestream.h"\n#include "cli_util.hpp"\n',
        'src/cli/cli_util.hpp': '#include <string>\n',
        'capi/api.cpp': '#include "runtime/context.hpp"\n#include "handle.hpp"\n',
        'capi/handle.hpp': '',
        'src/runtime/context.hpp': '#include "experts/source.hpp"\n',
    }
    bad = dict(clean)
    bad['src/model/weights.hpp'] = '#include "common/error.hpp"\n  #  include "experts/source.hpp"\n'
    bad['src/cli/main.cpp'] = '#include "moestream.h"\n#include "runtime/context.hpp"\n'
    bad['src/common/error.hpp'] = '#include "moestream.h"\n#include <model/model.hpp>\n'
    bad['src/experts/source.hpp'] = '#include "model/model.hpp"\n#include "context.hpp"\n'
    bad['src/runtime/context.hpp'] = '#include "capi/handle.hpp"\n#include "vendor/thing.hpp"\n'
    expected = [
        'src/cli/main.cpp:2:', 'src/common/error.hpp:2:', 'src/experts/source.hpp:2:',
        'src/model/weights.hpp:2:', 'src/runtime/context.hpp:1:', 'src/runtime/context.hpp:2:',
    ]

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in clean.items():
            write(os.path.join(tmp, 'clean'), rel, text)
        for rel, text in bad.items():
            write(os.path.join(tmp, 'bad'), rel, text)
        got = list(violations(os.path.join(tmp, 'clean'), ALLOWED))
        if got:
            failures.append('clean tree reported: ' + '; '.join(got))
        got = list(violations(os.path.join(tmp, 'bad'), ALLOWED))
        prefixes = sorted(v.split(' ', 1)[0] for v in got)
        if prefixes != expected:
            failures.append(f'bad tree: expected {expected}, got {got}')
        if not any('model must not include experts' in v for v in got):
            failures.append('bad tree: the message does not name the subsystems: ' + '; '.join(got))

    cyclic = dict(ALLOWED, common={'model'})
    try:
        check_table_is_acyclic(cyclic)
        failures.append('a table with common -> model -> common passed as acyclic')
    except SystemExit as e:
        if 'cycle' not in str(e):
            failures.append(f'cycle check said: {e}')

    for f in failures:
        print('self-test: ' + f)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--root', default=os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..')))
    parser.add_argument('--self-test', action='store_true')
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    return run(args.root, ALLOWED, sys.stdout)


if __name__ == '__main__':
    sys.exit(main())
