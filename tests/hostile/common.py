"""What every hostile case checks: the outcome, and that nothing changed.

A case runs a program as a user would (`run_program`: `python -m MODULE
FLAGS...` in a fresh process) or calls its library entry, then asserts one of
two outcomes:

- a clear error: exit status 1 and one line on stderr that names the thing
  at fault, never a traceback (`assert_one_line_error`);
- a correct result, checked by content.

and, with `Snapshot`, that every file that existed before the case is still
there with the same bytes (a checksum per file), whatever the outcome.
"""

import hashlib
import os
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))


def checksums(*roots):
    """`{path: sha256}` of every file under `roots` (files or folders)."""
    result = {}
    for root in roots:
        root = str(root)
        if os.path.isfile(root):
            result[root] = _sha(root)
            continue
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                if os.path.isfile(path):
                    result[path] = _sha(path)
    return result


def _sha(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Snapshot:
    """The files under `roots` before a case; `assert_unchanged` after it.

    `allow` lists paths the case may add (a lock's log, a new output); a file
    that existed before must keep its bytes in every case.
    """

    def __init__(self, *roots):
        self.roots = roots
        self.before = checksums(*roots)

    def changed(self):
        after = checksums(*self.roots)
        return sorted(path for path, digest in self.before.items()
                      if after.get(path) != digest)

    def assert_unchanged(self):
        changed = self.changed()
        assert not changed, f"files that existed before changed: {changed}"


def environment(**extra):
    """A subprocess environment: the repository importable, TF quiet."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    env.update(extra)
    return env


def run_program(module, *flags, cwd=None, timeout=600, env=None,
                preexec_fn=None, stdin=subprocess.DEVNULL):
    """Runs `python -m module flags...` and returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", module, *[str(f) for f in flags]],
        cwd=cwd or REPO, env=env or environment(), capture_output=True,
        text=True, timeout=timeout, preexec_fn=preexec_fn, stdin=stdin)


def start_program(module, *flags, cwd=None, env=None):
    """Starts `python -m module flags...` (stdout and stderr piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *[str(f) for f in flags]],
        cwd=cwd or REPO, env=env or environment(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


def kill_when(process, condition, timeout=300, poll=0.02):
    """SIGKILLs `process` as soon as `condition()` holds (or it ends).

    Returns:
        True when it was killed, False when it ended first.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if condition():
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True
        time.sleep(poll)
    process.kill()
    process.wait()
    raise AssertionError("the condition to kill at never held")


def error_lines(stderr):
    """The lines of stderr that are not logging noise (absl/TF prefixes)."""
    lines = []
    for line in stderr.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped[:1] in "IWD" and stripped[1:5].isdigit():
            continue  # absl/glog: I1126 20:21:35.123 ...
        lines.append(stripped)
    return lines


def assert_one_line_error(result, *names):
    """Exit status 1, no traceback, and a last line naming each of `names`.

    Returns:
        The error line.
    """
    assert result.returncode != 0, (
        f"expected an error, the program succeeded:\n{result.stderr[-3000:]}")
    assert "Traceback (most recent call last)" not in result.stderr, (
        result.stderr[-3000:])
    lines = error_lines(result.stderr)
    assert lines, f"no error message (exit {result.returncode})"
    line = lines[-1]
    for name in names:
        assert str(name) in line, f"{name!r} not in the error: {line!r}"
    return line
