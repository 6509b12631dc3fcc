"""What the serving benchmarks share: a vocabulary, texts of given
lengths, timing in turns and latency statistics."""

import os
import statistics

import numpy as np

from albert_tf.training import hardware


def spm_model(workdir, path=None):
    """The SentencePiece model file to use: `path`, else one of 8000 pieces
    trained here on the standard library's docstrings."""
    if path:
        return path
    from data_prep import builtin_corpus
    from data_prep import vocab

    corpus = os.path.join(workdir, "corpus.txt")
    builtin_corpus.write_corpus(corpus, max_chars=3_000_000)
    model_path, _ = vocab.train_vocab(
        corpus, os.path.join(workdir, "spm"), vocab_size=8000,
        hard_vocab_limit=False, input_sentence_size=100_000)
    return model_path


def albert_model(workdir, preset, spm_model_file=None, checkpoint=None):
    """`(proto, sp_model, pretrainer)`: the vocabulary (`spm_model`) and an
    `AlbertPretrainer` of `preset` (its vocabulary grown to the model's
    where a small preset has fewer pieces), random or from `checkpoint`."""
    import sentencepiece as spm

    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import checkpoint as checkpoint_lib

    with open(spm_model(workdir, spm_model_file), "rb") as f:
        proto = f.read()
    sp_model = spm.SentencePieceProcessor(model_proto=proto)
    config = AlbertConfig.from_preset(preset)
    if sp_model.get_piece_size() > config.vocab_size:  # small presets
        config = AlbertConfig.from_preset(
            preset, vocab_size=sp_model.get_piece_size())
    pretrainer = AlbertPretrainer(config)
    if checkpoint:
        checkpoint_lib.restore_model(pretrainer, checkpoint)
    return proto, sp_model, pretrainer


def texts(count, seed=0):
    """English-like sentences of about 200 words (more than 128 pieces)."""
    from data_prep import builtin_corpus

    sentences = []
    for document in builtin_corpus.iter_documents(max_chars=400_000):
        sentences.extend(document)
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(count):
        picked = rng.choice(len(sentences), 12, replace=False)
        texts.append(" ".join(sentences[i] for i in picked))
    return texts


def time_interleaved(fns, iterations, warmup):
    """`hardware.seconds_in_turns` of a list: one list of seconds per
    callable, in order."""
    times = hardware.seconds_in_turns(dict(enumerate(fns)), iterations, warmup)
    return [times[index] for index in range(len(fns))]


def stats(times, batch):
    median = statistics.median(times)
    return {"median_ms": 1000 * median,
            "p99_ms": 1000 * float(np.percentile(times, 99)),
            "throughput": batch / median}


def text_of_length(words, sp_model, tokens, start=0):
    """The longest run of `words` from `start` packing to <= `tokens`.

    Returns:
        `(text, packed_length)`, the length with `[CLS]` and `[SEP]`.
    """
    from data_prep import text as text_lib

    low, high = 1, min(len(words) - start, 4 * tokens)
    while low < high:  # the largest count of words that fits
        middle = (low + high + 1) // 2
        count = len(text_lib.tokenize_to_ids(
            sp_model, [" ".join(words[start:start + middle])])[0]) + 2
        low, high = (middle, high) if count <= tokens else (low, middle - 1)
    text = " ".join(words[start:start + low])
    return text, len(text_lib.tokenize_to_ids(sp_model, [text])[0]) + 2
