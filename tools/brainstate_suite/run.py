"""Run brainstate's own unit tests against this repository's packages, through a name shim.

    hatch run python tools/brainstate_suite/run.py [--files SUBSTRING] [--failures] [--keep DIR]

1. Downloads brainstate's release (sdist, else wheel) once into
   ~/.cache/state-brainstate-suite/ (reruns are offline) and extracts only its
   ``brainstate/**/*_test.py`` files into a work directory, keeping their paths.
2. Runs pytest on them in a subprocess with ``shim/`` first on PYTHONPATH, so
   ``import brainstate`` imports the shim, which maps brainstate's public names
   to state_core / state_random / state_transform / state_nn.
3. Prints the totals, a per-file table and (``--failures``) the biggest failure
   categories.  See README.md next to this file.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIM = HERE / 'shim'
CONFTEST = HERE / 'suite_conftest.py'
SCOPE = HERE / 'scope.txt'
KNOWN = HERE / 'known_differences.txt'
PORTING_PAGE = HERE.parents[1] / 'docs' / 'coming-from-brainstate.md'
DEFAULT_VERSION = '0.6.0'
CACHE = Path(os.environ.get('XDG_CACHE_HOME', Path.home() / '.cache')) / 'state-brainstate-suite'
TESTS_ROOT = 'suite'  # the extracted files live in <work>/suite/brainstate/...
PYTEST_INI = """\
[pytest]
addopts = --import-mode=importlib
markers =
    slow: slow test (skipped unless --run-slow)
"""


def _say(text: str, stream=None) -> None:
    """Write one message line and flush (the progress lines interleave with a long run)."""
    stream = stream or sys.stdout
    stream.write(text + '\n')
    stream.flush()


# --------------------------------------------------------------------------- download


def _archive(version: str, cache: Path) -> Path:
    """brainstate's sdist (or wheel) for ``version``, downloaded once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    for pattern in (f'brainstate-{version}.tar.gz', f'brainstate-{version}-*.whl'):
        found = sorted(cache.glob(pattern))
        if found:
            return found[0]
    attempts = [
        ('sdist', ['--no-binary', ':all:']),
        ('wheel', ['--only-binary', ':all:']),
    ]
    errors = []
    for kind, flags in attempts:
        cmd = [sys.executable, '-m', 'pip', 'download', f'brainstate=={version}', '--no-deps', *flags, '-d', str(cache)]
        _say(f'[suite] downloading brainstate {version} ({kind}) into {cache}')
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            return _archive(version, cache)
        errors.append(f'{kind}: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}')
    sys.exit(f'[suite] could not download brainstate {version}: {errors}')


def _is_test_member(name: str) -> str | None:
    """The path below the archive root if ``name`` is a ``brainstate/**/*_test.py`` file."""
    parts = name.split('/')
    if parts and parts[0].startswith('brainstate-'):  # sdist: brainstate-X.Y.Z/brainstate/...
        parts = parts[1:]
    if len(parts) >= 2 and parts[0] == 'brainstate' and parts[-1].endswith('_test.py'):
        return '/'.join(parts)
    return None


def _archive_names(archive: Path) -> list[str]:
    if archive.name.endswith('.tar.gz'):
        with tarfile.open(archive) as tar:
            return [m.name for m in tar.getmembers() if m.isfile()]
    with zipfile.ZipFile(archive) as whl:
        return whl.namelist()


def _read_member(archive: Path, name: str) -> bytes:
    if archive.name.endswith('.tar.gz'):
        with tarfile.open(archive) as tar:
            return tar.extractfile(name).read()
    with zipfile.ZipFile(archive) as whl:
        return whl.read(name)


def extract_tests(archive: Path, dest: Path) -> list[str]:
    """Write every ``brainstate/**/*_test.py`` of ``archive`` below ``dest``; return their relative paths."""
    written = []
    for name in _archive_names(archive):
        rel = _is_test_member(name)
        if rel:
            _write(dest / rel, _read_member(archive, name))
            written.append(rel)
    return sorted(written)


def module_names(archive: Path) -> list[str]:
    """The dotted names of brainstate's own modules in ``archive`` (not its tests): what the shim may alias."""
    out = set()
    for name in _archive_names(archive):
        parts = name.split('/')
        if parts and parts[0].startswith('brainstate-'):
            parts = parts[1:]
        if (
            len(parts) >= 2
            and parts[0] == 'brainstate'
            and parts[-1].endswith('.py')
            and not parts[-1].endswith('_test.py')
        ):
            dotted = [*parts[:-1], parts[-1][: -len('.py')]]
            if dotted[-1] == '__init__':
                dotted = dotted[:-1]
            out.add('.'.join(dotted))
    return sorted(out)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def read_scope(path: Path) -> list[str]:
    """The test file paths listed in ``path`` (one per line; ``#`` starts a comment)."""
    out = []
    for line in path.read_text(encoding='utf-8').splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            out.append(line)
    return out


def read_known(path: Path) -> list[tuple[re.Pattern[str], str]]:
    """The ``regex :: reason`` rules of ``known_differences.txt``."""
    rules = []
    for line in path.read_text(encoding='utf-8').splitlines():
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        # ' :: ' with spaces around: test ids contain '::' without them.
        pattern, reason = re.split(r'\s+::\s+', line.strip(), maxsplit=1)
        rules.append((re.compile(pattern), reason))
    return rules


def explain(tests: dict, page: str, rules: list[tuple[re.Pattern[str], str]]) -> dict[str, list[str]]:
    """Sort the failures by what explains them (see known_differences.txt); '' is unexplained."""
    out: dict[str, list[str]] = defaultdict(list)
    for nodeid, t in tests.items():
        if t['outcome'] not in ('failed', 'error', 'xpassed'):
            continue
        text = f"{nodeid} | {t['type']}: {t['msg']}"
        # A lenient-import placeholder names itself: '... is not provided' when it is used, its
        # repr (<class 'brainstate.environ._INITIAL_PRECISION'>) when a test only compares it.
        missing = re.search(r'(brainstate[\w.]*) is not provided', t['msg']) or re.search(
            r"<class '(brainstate\.[\w.]+)'>", t['msg']
        )
        attr = re.search(r"has no attribute '(\w+)'", t['msg']) if t['type'] == 'AttributeError' else None
        name = missing.group(1) if missing else attr.group(1) if attr else None
        if name is not None:
            parts = name.split('.')
            if any(p.startswith('_') for p in parts[1:]) or (attr is not None and name.startswith('_')):
                out['a brainstate private helper or module'].append(nodeid)
                continue
            if f'`{parts[-1]}' in page:
                out['a name the porting page lists as not provided'].append(nodeid)
                continue
        for pattern, reason in rules:
            if pattern.search(text):
                out[reason].append(nodeid)
                break
        else:
            out[''].append(nodeid)
    return out


def render_explained(tests: dict, explained: dict[str, list[str]]) -> str:
    unexplained = explained.get('', [])
    n = sum(len(v) for v in explained.values())
    lines = ['', f'## What explains the {n} failures', '', '| count | explained by |', '| ---: | --- |']
    for reason, ids in sorted(explained.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if reason:
            lines.append(f'| {len(ids)} | {reason} |')
    lines.append(f'| {len(unexplained)} | **unexplained** (listed below) |')
    if unexplained:
        lines += ['', '### Unexplained failures', '']
        for nodeid in sorted(unexplained):
            t = tests[nodeid]
            shown = nodeid[len(TESTS_ROOT) + 1 :] if nodeid.startswith(TESTS_ROOT + '/') else nodeid
            lines.append(f"- {shown}: {t['type']}: {t['msg'][:120]}")
    return '\n'.join(lines) + '\n'


def count_test_functions(path: Path) -> int:
    """Test functions in a file, counted statically (for files that cannot be imported)."""
    try:
        tree = ast.parse(path.read_text(encoding='utf-8'))
    except SyntaxError:
        return 0
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith('test'):
            n += 1
    return n


# --------------------------------------------------------------------------- running


def run_pytest(work: Path, targets: list[str], args: argparse.Namespace) -> Path:
    """Run pytest (resuming after a crash of the interpreter); return the results file."""
    results = work / 'results.jsonl'
    done_file = work / 'done.txt'
    log = work / 'pytest.log'
    for path in (results, done_file, log):
        path.unlink(missing_ok=True)
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([str(SHIM), *filter(None, [env.get('PYTHONPATH')])])
    env['BRAINSTATE_SUITE_RESULTS'] = str(results)
    env['BRAINSTATE_SUITE_DONE'] = str(done_file)
    env['BRAINSTATE_SUITE_MODULES'] = str(work / 'modules.txt')
    if args.no_testing_helpers:
        env['BRAINSTATE_SUITE_NO_TESTING_HELPERS'] = '1'
    if args.lenient_imports:
        env['BRAINSTATE_SUITE_LENIENT'] = '1'
    cmd = [
        sys.executable, '-m', 'pytest',
        '-c', str(work / 'pytest.ini'), '--rootdir', str(work),
        '-p', 'no:cacheprovider', '-q', '-rN', '--color=no', '--continue-on-collection-errors',
        '--junitxml', str(work / 'junit.xml'),
    ]  # fmt: skip
    if _has_module('pytest_timeout'):
        cmd.append(f'--timeout={args.timeout:g}')
    else:
        env['BRAINSTATE_SUITE_TIMEOUT'] = f'{args.timeout:g}'
    if args.run_slow:
        cmd.append('--run-slow')
    cmd += args.pytest_args + targets
    for attempt in range(1, args.max_restarts + 2):
        _say(f'[suite] pytest run {attempt}: log in {log}')
        with open(log, 'a', encoding='utf-8') as out:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
            code = _wait_with_progress(proc, results)
        if code in (0, 1, 5):  # all passed / some failed / nothing collected
            break
        crashed = _crashed_test(results)
        if crashed is None or code in (2, 3, 4):  # interrupted / internal error / usage error
            _say(f'[suite] pytest exited with {code}; see {log}')
            break
        why = f'signal {-code}' if code < 0 else f'exit code {code}'
        _say(f'[suite] the interpreter died ({why}) in {crashed}; resuming after it')
        with open(results, 'a', encoding='utf-8') as f:
            record = {'ev': 'phase', 'nodeid': crashed, 'when': 'call', 'outcome': 'failed'}
            record.update(type='Crash', msg=f'the test process died ({why})')
            f.write(json.dumps(record) + '\n')
        with open(done_file, 'w', encoding='utf-8') as f:
            f.writelines(nodeid + '\n' for nodeid in _recorded_tests(results))
    return results


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _wait_with_progress(proc: subprocess.Popen, results: Path, every: float = 30.0) -> int:
    last = time.monotonic()
    try:
        while True:
            try:
                return proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() - last >= every:
                last = time.monotonic()
                n, current = 0, ''
                if results.exists():
                    for line in results.read_text(encoding='utf-8').splitlines():
                        rec = json.loads(line)
                        if rec['ev'] == 'start':
                            n, current = n + 1, rec['nodeid']
                _say(f'[suite] {n} tests started; now {current}')
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        return proc.wait()


def _records(results: Path) -> list[dict]:
    if not results.exists():
        return []
    out = []
    for line in results.read_text(encoding='utf-8').splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line cut short by a crash
            out.append(json.loads(line))
    return out


def _recorded_tests(results: Path) -> set[str]:
    return {r['nodeid'] for r in _records(results) if r['ev'] == 'phase'}


def _crashed_test(results: Path) -> str | None:
    started = None
    finished = set()
    for rec in _records(results):
        if rec['ev'] == 'start':
            started = rec['nodeid']
        elif rec['ev'] == 'phase' and rec['when'] == 'teardown':
            finished.add(rec['nodeid'])
    return started if started is not None and started not in finished else None


# --------------------------------------------------------------------------- summarising


def summarise(results: Path, files: list[str]) -> dict:
    """Per-test outcomes and per-file counts from the recorder's JSON lines."""
    phases: dict[str, list[dict]] = defaultdict(list)
    collect_errors: dict[str, dict] = {}
    for rec in _records(results):
        if rec['ev'] == 'phase':
            phases[rec['nodeid']].append(rec)
        elif rec['ev'] == 'collect_error':
            collect_errors[rec['nodeid']] = rec
    tests = {}
    for nodeid, recs in phases.items():
        by_when = {r['when']: r for r in recs}  # a resumed test keeps its last record per phase
        failing = [r for r in by_when.values() if r['outcome'] == 'failed']
        call = by_when.get('call')
        if call is not None and call['outcome'] == 'failed':
            outcome, cause = ('xpassed' if call.get('xfail') else 'failed'), call
        elif failing:
            outcome, cause = 'error', failing[0]
        elif any(r['outcome'] == 'skipped' for r in by_when.values()):
            skipped = next(r for r in by_when.values() if r['outcome'] == 'skipped')
            outcome, cause = ('xfailed' if skipped.get('xfail') else 'skipped'), skipped
        else:
            outcome, cause = 'passed', None
        tests[nodeid] = {
            'outcome': outcome,
            'type': (cause or {}).get('type', ''),
            'msg': (cause or {}).get('msg', ''),
            'when': (cause or {}).get('when', ''),
            'duration': (call or {}).get('duration', 0.0),
        }
    per_file: dict[str, Counter] = {rel: Counter() for rel in files}
    for nodeid, t in tests.items():
        per_file.setdefault(_file_of(nodeid), Counter())[t['outcome']] += 1
    import_errors = {}
    for nodeid, rec in collect_errors.items():
        rel = _file_of(nodeid)
        import_errors[rel] = rec
        per_file.setdefault(rel, Counter())['import error'] += 1
    return {'tests': tests, 'per_file': per_file, 'import_errors': import_errors}


def _file_of(nodeid: str) -> str:
    path = nodeid.split('::', 1)[0]
    prefix = TESTS_ROOT + '/'
    return path[len(prefix) :] if path.startswith(prefix) else path


def _normalise(msg: str) -> str:
    msg = re.sub(r'0x[0-9a-fA-F]+', '0x…', msg)
    msg = re.sub(r'\d+(\.\d+)?', '#', msg)
    return msg[:90]


def categories(tests: dict, import_errors: dict) -> list[tuple[int, str, list[str]]]:
    """Failures and errors grouped by exception type and the start of the message, biggest first."""
    groups: dict[str, list[str]] = defaultdict(list)
    for nodeid, t in tests.items():
        if t['outcome'] in ('failed', 'error', 'xpassed'):
            tag = '' if t['outcome'] == 'failed' else f"[{t['outcome']} in {t['when']}] "
            groups[f"{tag}{t['type']}: {_normalise(t['msg'])}"].append(nodeid)
    for rel, rec in import_errors.items():
        groups[f"[import error] {rec['type']}: {_normalise(rec['msg'])}"].append(rel)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(len(ids), key, ids) for key, ids in ranked]


def render(summary: dict, work: Path, failures: bool, top: int) -> str:
    tests, per_file, import_errors = summary['tests'], summary['per_file'], summary['import_errors']
    totals = Counter(t['outcome'] for t in tests.values())
    lines = []
    collected = len(tests)
    lines.append('## Totals')
    lines.append('')
    lines.append(f'- collected tests: {collected} (in {len(per_file) - len(import_errors)} files that imported)')
    lines.append(f"- passed: {totals['passed']}")
    lines.append(f"- failed: {totals['failed'] + totals['xpassed']}")
    n_errors = totals['error'] + len(import_errors)
    lines.append(
        f'- errors: {n_errors} ({totals["error"]} in test setup/teardown, '
        f'{len(import_errors)} files that failed to import)'
    )
    lines.append(f"- skipped: {totals['skipped'] + totals['xfailed']}")
    not_run = sum(count_test_functions(work / TESTS_ROOT / rel) for rel in import_errors)
    lines.append(f'- test functions in the files that failed to import (counted statically, not run): {not_run}')
    lines.append('')
    lines.append('## Per file')
    lines.append('')
    lines.append('| file | passed / total | failed | errors | skipped |')
    lines.append('| --- | ---: | ---: | ---: | ---: |')
    for rel in sorted(per_file):
        c = per_file[rel]
        if rel in import_errors:
            rec = import_errors[rel]
            n = count_test_functions(work / TESTS_ROOT / rel)
            lines.append(f"| {rel} | import error (~{n} tests): {rec['type']}: {rec['msg'][:80]} | | 1 | |")
            continue
        total = sum(c.values())
        lines.append(
            f"| {rel} | {c['passed']} / {total} | {c['failed'] + c['xpassed']} | {c['error']} | "
            f"{c['skipped'] + c['xfailed']} |"
        )
    if import_errors:
        lines.append('')
        lines.append('## Files that failed to import (one error each)')
        lines.append('')
        for rel, rec in sorted(import_errors.items()):
            lines.append(f"- {rel}: {rec['type']}: {rec['msg'][:160]}")
    if failures:
        lines.append('')
        lines.append(f'## Biggest failure categories (top {top})')
        lines.append('')
        lines.append('| count | exception: message prefix | example |')
        lines.append('| ---: | --- | --- |')
        for n, key, ids in categories(tests, import_errors)[:top]:
            example = ids[0][len(TESTS_ROOT) + 1 :] if ids[0].startswith(TESTS_ROOT + '/') else ids[0]
            lines.append(f"| {n} | {key.replace('|', '/')} | {example} |")
    return '\n'.join(lines) + '\n'


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        '--files',
        action='append',
        default=[],
        metavar='SUBSTRING',
        help='only test files whose path (brainstate/...) contains SUBSTRING (repeatable)',
    )
    parser.add_argument(
        '--scope',
        action='store_true',
        help='only the test files listed in scope.txt (what this project re-implements): the porting metric',
    )
    parser.add_argument(
        '--explain',
        action='store_true',
        help='sort the failures by what explains them: names the porting page lists as not provided, brainstate '
        'private helpers, the rules of known_differences.txt; list the unexplained ones',
    )
    parser.add_argument(
        '--reuse',
        metavar='DIR',
        help='do not run: report on the results a previous --keep DIR run left there',
    )
    parser.add_argument('--failures', action='store_true', help='list the biggest failure categories')
    parser.add_argument('--top', type=int, default=25, help='how many failure categories to list (default 25)')
    parser.add_argument('--keep', metavar='DIR', help='work in DIR and keep it (default: a temporary directory)')
    parser.add_argument('--report', metavar='FILE', help='also write the report (Markdown) to FILE')
    parser.add_argument('--version', default=DEFAULT_VERSION, help=f'brainstate version (default {DEFAULT_VERSION})')
    parser.add_argument(
        '--timeout', type=float, default=120.0, help='per-test time limit in seconds (default 120; 0: none)'
    )
    parser.add_argument('--run-slow', action='store_true', help="also run brainstate's tests marked slow")
    parser.add_argument(
        '--no-testing-helpers',
        action='store_true',
        help="leave out the shim's brainstate._testing (the suite's assertion helpers)",
    )
    parser.add_argument(
        '--lenient-imports',
        action='store_true',
        help='import names the shim lacks as placeholders that fail when used, so that one missing import '
        'no longer fails a whole file (an analysis aid; the headline number is without it)',
    )
    parser.add_argument('--max-restarts', type=int, default=20, help='resume at most this often after a crash')
    parser.add_argument('pytest_args', nargs='*', help='extra pytest arguments (after --)')
    args = parser.parse_args(argv)

    if args.reuse:
        work = Path(args.reuse).resolve()
        if not (work / 'results.jsonl').exists():
            _say(f'[suite] --reuse {work}: no results.jsonl there (run once with --keep {work})', sys.stderr)
            return 2
        files = sorted(p.relative_to(work / TESTS_ROOT).as_posix() for p in (work / TESTS_ROOT).rglob('*_test.py'))
        return _report(work, _select(files, args), args, work / 'results.jsonl', None)
    archive = _archive(args.version, CACHE)
    if args.keep:
        work = Path(args.keep).resolve()
        if (work / TESTS_ROOT).exists():
            shutil.rmtree(work / TESTS_ROOT)
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix='brainstate-suite-'))
    try:
        files = _select(extract_tests(archive, work / TESTS_ROOT), args)
        (work / 'modules.txt').write_text('\n'.join(module_names(archive)) + '\n', encoding='utf-8')
        if not files:
            _say(f'[suite] no test file matches {args.files}', stream=sys.stderr)
            return 2
        shutil.copyfile(CONFTEST, work / 'conftest.py')
        (work / 'pytest.ini').write_text(PYTEST_INI, encoding='utf-8')
        _say(f'[suite] brainstate {args.version} from {archive.name}: {len(files)} test files; work dir {work}')
        start = time.monotonic()
        results = run_pytest(work, [f'{TESTS_ROOT}/{rel}' for rel in files], args)
        return _report(work, files, args, results, time.monotonic() - start)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _select(files: list[str], args: argparse.Namespace) -> list[str]:
    """The test files that --scope and --files pick."""
    if args.scope:
        wanted = read_scope(SCOPE)
        absent = sorted(set(wanted) - set(files))
        if absent:
            _say(f'[suite] scope.txt names files brainstate {args.version} does not ship: {absent}', sys.stderr)
        files = [rel for rel in files if rel in wanted]
    if args.files:
        files = [rel for rel in files if any(s in rel for s in args.files)]
    return files


def _report(work: Path, files: list[str], args: argparse.Namespace, results: Path, seconds: float | None) -> int:
    summary = summarise(results, files)
    chosen = set(files)
    summary['tests'] = {k: t for k, t in summary['tests'].items() if _file_of(k) in chosen}
    mode = ', '.join(m for m, on in (('scope.txt files', args.scope), ('lenient imports', args.lenient_imports)) if on)
    mode = f' ({mode})' if mode else ''
    took = f', {seconds:.0f} s' if seconds is not None else ''
    header = f'# brainstate {args.version} test suite through the name shim{mode}\n\n{len(files)} test files{took}.\n\n'
    text = header + render(summary, work, args.failures, args.top)
    if args.explain:
        page = PORTING_PAGE.read_text(encoding='utf-8')
        text += render_explained(summary['tests'], explain(summary['tests'], page, read_known(KNOWN)))
    _say(text)
    if args.report:
        Path(args.report).write_text(text, encoding='utf-8')
    (work / 'summary.json').write_text(json.dumps(summary['tests'], indent=1), encoding='utf-8')
    return 0


if __name__ == '__main__':
    sys.exit(main())
