"""An English corpus that every machine with Python has: standard-library docstrings.

Each docstring of a module, class or function in the standard library (and,
optionally, in the installed packages) becomes one document; its paragraphs are
split into sentences, one per line, documents separated by a blank line, which
is the input format of `create_pretraining_data`. Doctest lines, parameter
tables and other code-like lines are left out, so the text is mostly prose.
"""

import ast
import logging
import os
import re
import sysconfig

from foundation import safe_io

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_CODE_LIKE = re.compile(r"^\s*(>>>|\.\.\.|[-=*~^]{3,}|[:@]\w+|\$ |\w+\s*=)")
_MIN_WORDS = 4


def prose_sentences(text):
    """Prose sentences of a text whose paragraphs are separated by blank
    lines (a docstring, a manual's section), one string each: paragraphs
    that look like code are left out, and so are sentences of fewer than
    four words or without final punctuation."""
    paragraphs = re.split(r"\n\s*\n", text)
    out = []
    for paragraph in paragraphs:
        lines = [line.strip() for line in paragraph.splitlines()]
        if not lines or any(_CODE_LIKE.match(line) for line in lines):
            continue
        text = " ".join(line for line in lines if line)
        for sentence in _SENTENCE_END.split(text):
            sentence = sentence.strip()
            if len(sentence.split()) >= _MIN_WORDS and sentence[-1:] in ".!?":
                out.append(sentence)
    return out


def _docstrings(path):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def source_roots(include_site_packages=False):
    """Folders whose `.py` files are read: the standard library, optionally more."""
    paths = sysconfig.get_paths()
    roots = [paths["stdlib"]]
    if include_site_packages:
        roots.append(paths["purelib"])
    return roots


def _module_name(root, path):
    """The dotted module name of `path` under `root` ("email.mime.text")."""
    relative = os.path.splitext(os.path.relpath(path, root))[0]
    parts = relative.split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def iter_module_documents(roots=None, max_chars=None):
    """Yields `(module, sentences)` per document, in a fixed (sorted) order.

    `module` is the dotted name of the file the docstring comes from, so that
    callers can hold out whole packages.

    Args:
        roots: folders to read; default `source_roots()`.
        max_chars: stop once this many characters have been yielded.
    """
    total = 0
    for root in roots or source_roots():
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in (
                "__pycache__", "test", "tests", "idlelib", "site-packages"))
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                module = _module_name(root, path)
                for doc in _docstrings(path):
                    sentences = prose_sentences(doc)
                    if len(sentences) < 2:
                        continue
                    yield module, sentences
                    total += sum(len(s) + 1 for s in sentences)
                    if max_chars and total >= max_chars:
                        return


def iter_documents(roots=None, max_chars=None):
    """Yields documents, each a list of sentences, in a fixed (sorted) order.

    Args:
        roots: folders to read; default `source_roots()`.
        max_chars: stop once this many characters have been yielded.
    """
    for _, sentences in iter_module_documents(roots, max_chars):
        yield sentences


def write_corpus(path, max_chars=None, roots=None):
    """Writes the corpus as text (one sentence a line, blank line between documents).

    Returns:
        `(documents, sentences, characters)` written.
    """
    docs = sentences = chars = 0
    with safe_io.AtomicFile(path) as f:
        for document in iter_documents(roots=roots, max_chars=max_chars):
            f.write(("\n".join(document) + "\n\n").encode("utf-8"))
            docs += 1
            sentences += len(document)
            chars += sum(len(s) + 1 for s in document) + 1
    logging.info("Wrote %d documents, %d sentences, %d characters to %s",
                 docs, sentences, chars, path)
    return docs, sentences, chars
