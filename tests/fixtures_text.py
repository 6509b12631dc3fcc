"""Synthetic text for the tests of the data preparation and the tokenizers.

- `synthetic_chunk`: tests/test_sentence_order.py and test_instances.py.
- `CONTROL_TEXTS`: tests/test_on_device_tokenizer.py and test_litert.py.
"""

import random

import numpy as np

# Control and format characters: NUL (the SavedModels' lowercasing once
# dropped the rest of the text after it), other C0 and C1 controls, DEL,
# noncharacters, zero-width and bidi format characters, a BOM, a soft
# hyphen, an encoded lone surrogate (malformed UTF-8).
CONTROL_TEXTS = [
    b"a\x00b", b"\x00", b"Caf\xc3\xa9\x00 CAF\xc3\x89", b"\x00\x00X y\x00",
    b"In 1990\x00, 3,000", b"a\x01b\x1fc\x7fd", b"x\x0bY\x0cz\x1c w",
    "a\u0085b\u009fc\u0080".encode(), "a\ufffeb\uffffc".encode(),
    b"a\xed\xa0\x80b \xed\xbf\xbfC", "a\u200bb\u200cc\u200dd".encode(),
    "a\u2060b\ufeffc\u00adD".encode(), "a\u202eb\u2066c\u061cd".encode(),
    "\u03a3\x00\u03a3A \u039f\u03a3\x00".encode(),
]


def synthetic_chunk(seed, num_docs=300, vocab_size=200):
    """Flat ids (>= 13) of random sentences; word starts at ids < 120."""
    rng = random.Random(seed)
    offsets, documents = [0], []
    for _ in range(num_docs):
        first = len(offsets) - 1
        for _ in range(rng.randint(2, 10)):
            offsets.append(offsets[-1] + rng.choice([1, 2, 5, 12, 20, 30, 70]))
        documents.append((first, len(offsets) - 1))
    flat = np.random.default_rng(seed).integers(13, vocab_size, offsets[-1])
    start_table = np.zeros(vocab_size, bool)
    start_table[13:120] = True
    return flat.astype(np.int32), offsets, documents, start_table
