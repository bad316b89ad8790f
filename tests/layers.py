#!/usr/bin/env python3
"""The layers check over the whole tree (docs/design.md, section 1).

Every #include line of libsfl/, server/, ctl/, client-agent/ and sim/ (.c, .h,
.inc) is resolved the way the compiler does: "x.h" in the including file's
folder first, then the -I folders the Makefile gives that file (asked of
`make -n`), <x.h> in the -I folders only. The file it lands on has a layer;
an include that runs up, sideways into another program, into libsfl's
internals from a program, or out of the checked tree is printed as

    FAIL|WARN FILE:LINE: FROM -> TO (the include as written -> the file)

FAIL lines make the exit status 1. Server folder rules print WARN until the
daemon's headers are split (issue 26); SERVER_FATAL = True makes them FAIL.

    tests/layers.py [--root DIR]    (DIR: a copy of the tree; default .)
"""
import os
import re
import subprocess
import sys

# The one switch: server/'s folder rules fatal too.
SERVER_FATAL = False

# libsfl: the layers ARE the folders libsfl/include/sfl/LAYER/ and
# libsfl/src/LAYER/ (the Makefile's SFL_LAYERS); this table says what each
# sits on directly. A layer may include itself and everything below it
# (transitively). A folder with no row, or a row with no folder, fails.
LIBSFL_BELOW = {
    'core': [],                  # vectors, top-k, rng, errors, alloc, ini, log
    'data': ['core'],            # CSR, readers, generators, partitioners
    'model': ['data'],           # losses and models, dictionaries, eval
    'dp': ['core'],              # noise mechanisms and privacy accounting
    'algo': ['model', 'dp'],     # the algorithm table and the algorithms
    'crypto': ['core'],          # libsodium: seal, shamir, secure aggregation
    'wire': ['crypto'],          # protobuf codec (sizes from crypto's headers)
    'net': ['core'],             # TLS, HTTP/2, gRPC framing
}
# libsfl/include/sfl/sfl.h, the umbrella: may include every public header;
# nothing in libsfl includes it.
UMBRELLA = 'libsfl/include/sfl/sfl.h'

# server/ (sfl-coordinator): its folders, lowest first, and what each sits on
# directly ('' is server/ itself: the daemon's core, coord_int.h, and main).
SERVER_BELOW = {
    'store': [],                 # SQLite store and its single writer
    'http': [],                  # /metrics text and the status page
    'job': ['store'],            # pure job logic: spec, [job] sections, model and
                                 # aggregator, round machine, vertical model, ledger
    'round': ['job', 'http'],    # the driver, the round kinds, the daemon's jobs
                                 # and writes
    'service': ['round'],        # the gRPC services (agents, admin, submit) and
                                 # the HTTP pages over the daemon's state
    'fleet': [],                 # the front-end role (role = frontend): agents'
                                 # calls relayed to the master; no daemon state
    '': ['service', 'fleet'],    # the daemon: coord.c, coord_int.h, main
}
# server/ folders with no daemon state (they never see coord_int.h): their
# rows are fatal now, whatever SERVER_FATAL says.
SERVER_PURE = {'store', 'http', 'job', 'fleet'}

# The programs: each includes its own files and libsfl's public headers
# (libsfl/include/) only, never another program's nor libsfl/src/.
PROGRAMS = ['server', 'ctl', 'client-agent', 'sim']
# ... but for a program's part that is a library of its own (the Makefile
# builds it apart) and the programs that may use it: the coordinator's pure
# job logic (server/job/, libjob.a), with which sflctl checks job files.
SHARED = {('server', 'job'): {'ctl'}}

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\n]+)[">]', re.M)


def closure(below):
    out = {}
    for layer in below:
        seen, todo = {layer}, list(below[layer])
        while todo:
            b = todo.pop()
            if b not in seen:
                seen.add(b)
                todo.extend(below.get(b, []))
        out[layer] = seen
    return out


def unit_of(path):
    """(area, layer) of a tree path, or None when it is in no layer."""
    parts = path.split('/')
    if parts[0] == 'libsfl':
        if path == UMBRELLA:
            return ('libsfl', 'umbrella')
        if len(parts) == 4 and parts[1] == 'src':
            return ('libsfl', parts[2])
        if len(parts) == 5 and parts[1:3] == ['include', 'sfl']:
            return ('libsfl', parts[3])
        return None
    if parts[0] == 'server':
        return ('server', parts[1] if len(parts) > 2 else '')
    if parts[0] in PROGRAMS:
        return (parts[0], '')
    return None


def name(u):
    area, layer = u
    if area == 'libsfl':
        return 'libsfl/' + layer
    return area + ('/' + layer if layer else '')


def sources(root):
    out = []
    for top in ['libsfl'] + PROGRAMS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(('.c', '.h', '.inc')):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return out


def include_dirs(root, cfiles):
    """{file.c: [-I folder, ...]} from the compile lines `make -n` prints."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL')}
    objs = ['build/' + c[:-2] + '.o' for c in cfiles]
    r = subprocess.run(['make', '-n', '-B', '--no-print-directory', 'BUILD=build',
                        'SYSROOT_STAMP=', 'CROSS='] + objs, cwd=root, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        sys.exit('layers: make -n failed:\n' + r.stderr)
    out = {}
    for line in r.stdout.splitlines():
        w = line.split()
        if '-c' not in w or '-o' not in w:
            continue
        src = [x for x in w if x in cfiles]
        if not src:
            continue
        dirs, i = [], 0
        while i < len(w):
            if w[i] == '-I' and i + 1 < len(w):
                dirs.append(w[i + 1]); i += 1
            elif w[i].startswith('-I'):
                dirs.append(w[i][2:])
            i += 1
        out[src[0]] = [os.path.normpath(d) for d in dirs]
    missing = [c for c in cfiles if c not in out]
    if missing:
        sys.exit('layers: make -n gave no compile line for ' + ' '.join(missing))
    return out


def main():
    args = sys.argv[1:]
    root = '.'
    if '--root' in args:
        root = args[args.index('--root') + 1]
    files = sources(root)
    cfiles = [f for f in files if f.endswith('.c')]
    flags = include_dirs(root, cfiles)

    problems = []   # (fatal, a server folder rule, text)

    def report(fatal, text, server=False):
        problems.append((fatal, server, text))

    # Layers declared once: every libsfl folder has a row and every row a folder.
    folders = set()
    for sub in ('include/sfl', 'src'):
        d = os.path.join(root, 'libsfl', sub)
        folders |= {x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x))}
    for f in sorted(folders ^ set(LIBSFL_BELOW)):
        report(True, 'libsfl layer %s: %s' % (
            f, 'a folder with no row in LIBSFL_BELOW' if f in folders
            else 'a row in LIBSFL_BELOW with no folder'))
    sdirs = {x for x in os.listdir(os.path.join(root, 'server'))
             if os.path.isdir(os.path.join(root, 'server', x))} | {''}
    for f in sorted(sdirs ^ set(SERVER_BELOW)):
        report(SERVER_FATAL, 'server folder %s/: %s' % (
            f, 'no row in SERVER_BELOW' if f in sdirs else 'a row with no folder'),
            server=True)
    lib_ok = closure(LIBSFL_BELOW)
    srv_ok = closure(SERVER_BELOW)

    # A header or .inc is compiled with the flags of the .c files of its own
    # layer (else of its area): the union, in order.
    def unit_flags(u):
        own = [c for c in cfiles if unit_of(c) == u] or \
              [c for c in cfiles if (unit_of(c) or ('',))[0] == u[0]]
        out = []
        for c in own:
            out += [d for d in flags[c] if d not in out]
        return out

    generated = {}   # generated -I folder -> the layers whose objects get it
    for c in cfiles:
        for d in flags[c]:
            if not os.path.isdir(os.path.join(root, d)) or d.split('/')[0] == 'build':
                generated.setdefault(d, set()).add(unit_of(c))

    def find(inc, search):
        for d in search:
            p = os.path.normpath(os.path.join(d, inc))
            if os.path.isfile(os.path.join(root, p)):
                return p
        return None

    lines = resolved = 0
    for f in files:
        u = unit_of(f)
        if u is None:
            report(True, '%s: in no layer (move it into a layer folder)' % f)
            continue
        idirs = flags[f] if f in flags else unit_flags(u)
        with open(os.path.join(root, f), errors='replace') as fh:
            text = fh.read()
        # Comments out, line numbers kept; then the include lines.
        text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'),
                      text, flags=re.S)
        for m in INCLUDE.finditer(text):
            n = text.count('\n', 0, m.start()) + 1
            lines += 1
            quote, inc = m.group(1) == '"', m.group(2)
            search = ([os.path.dirname(f)] if quote else []) + idirs
            # The build's own output (build/gen...) is judged by who gets
            # its -I below, whether or not it has been made yet.
            target = find(inc, [d for d in search if d not in generated])
            where = '%s:%d' % (f, n)
            written = '%s%s%s' % (m.group(1), inc, '"' if quote else '>')
            if target is None and quote:
                # Not on this file's path: another part's file? (The compiler
                # would stop here; the message says whose it is.)
                target = find(inc, [d for c in cfiles
                                    for d in [os.path.dirname(c)] + flags[c]
                                    if d not in generated])
                if target is not None:
                    written += ', not on its -I path,'
            if target is None:
                gen = [d for d in idirs if d in generated]
                if gen and quote:   # made by the build (protoc-c, EXTRA_ALGOS)
                    resolved += 1
                    if not any(u in generated[d] for d in gen):
                        report(True, '%s: %s -> generated %s, given to %s only' % (
                            where, name(u), written,
                            ', '.join(sorted(name(x) for d in gen for x in generated[d]))))
                elif quote:
                    report(True, '%s: %s resolves to no file' % (where, written))
                continue            # <x.h> found nowhere in the tree: a system header
            resolved += 1
            t = unit_of(target)
            how = '%s -> %s' % (written, target)
            if t is None:
                report(True, '%s: %s -> a file in no layer (%s)' % (where, name(u), how))
            elif u[0] == 'libsfl' and t[0] != 'libsfl':
                report(True, '%s: libsfl includes a program: %s -> %s (%s)' % (
                    where, name(u), name(t), how))
            elif u[0] != 'libsfl' and t[0] == 'libsfl':
                if not target.startswith('libsfl/include/'):
                    report(True, '%s: %s -> libsfl internals %s (%s)' % (
                        where, name(u), name(t), how))
            elif u[0] != t[0] and u[0] not in SHARED.get(t, ()):
                report(True, '%s: one program includes another: %s -> %s (%s)' % (
                    where, name(u), name(t), how))
            elif u[0] == 'libsfl':
                if t == ('libsfl', 'umbrella') or (
                        u[1] != 'umbrella' and t[1] not in lib_ok.get(u[1], {u[1]})):
                    report(True, '%s: upward include %s -> %s (%s)' % (
                        where, name(u), name(t), how))
            elif u[0] == 'server' and t[1] not in srv_ok.get(u[1], {u[1]}):
                pure = u[1] in SERVER_PURE
                report(SERVER_FATAL or pure, '%s: upward include %s -> %s (%s)' % (
                    where, name(u), name(t), how), server=not pure)

    fatal = sum(1 for x in problems if x[0])
    for is_fatal, _, text in problems:
        print(('FAIL ' if is_fatal else 'WARN ') + text)
    print('layers: %d include lines in %d files, %d of them into the tree; '
          '%d FAIL, %d server folder violations (%s)' % (
              lines, len(files), resolved, fatal, sum(1 for x in problems if x[1]),
              'fatal: SERVER_FATAL' if SERVER_FATAL else 'WARN only'))
    return 1 if fatal else 0


if __name__ == '__main__':
    sys.exit(main())
