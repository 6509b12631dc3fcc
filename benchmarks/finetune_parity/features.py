"""SQuAD features: `albert_tf.tasks.squad_reader.convert_examples` against the
reference's offset-mapping preprocessing, every difference counted by
cause.
"""

import collections
import re

from benchmarks.finetune_parity.reference import reference_tokenizer
from benchmarks.finetune_parity.reference import reference_train_features


def _tokenization_cause(ours_tok, tokenizer, text):
    """None when both sides give the same ids for `text`, else the cause:
    `digit_comma_split` when the pieces spell the same text and the
    reference holds a piece ending in a digit and a comma (which the
    official tokenization splits in two), else `other_tokenization`."""
    mine = ours_tok.encode(text)
    theirs = tokenizer(text.lstrip(), add_special_tokens=False)["input_ids"]
    if mine == theirs:
        return None
    their_pieces = tokenizer.convert_ids_to_tokens(theirs)
    if ("".join(ours_tok.id_to_piece(i) for i in mine)
            == "".join(their_pieces)
            and any(re.search(r"[0-9],$", p) for p in their_pieces)):
        return "digit_comma_split"
    return "other_tokenization"


def _example_cause(example, ours_tok, tokenizer, max_query_length,
                   reference_features):
    """Why an example's features differ: the first reason that applies.

    - `question_truncated_here_only`: longer than `max_query_length` here;
      the reference keeps questions whole (so its windows hold less context).
    - `digit_comma_split`, `other_tokenization`: see `_tokenization_cause`.
    - `reference_start_off_context`: the reference's answer start lands on
      `[SEP]` (an answer starting at a window's last context token: its
      search runs past the context), where this side names the token.
    - `coarse_offsets_here`: the text around the answer changes length in
      preprocessing (two backquotes become one double quote), and this
      side's pieces of such a word all span the whole word, so the target
      takes the word's punctuation pieces too; the reference's offsets are
      exact to the character.
    """
    if len(ours_tok.encode(example.question_text)) > max_query_length:
        return "question_truncated_here_only"
    for text in (example.question_text, example.context_text):
        cause = _tokenization_cause(ours_tok, tokenizer, text)
        if cause:
            return cause
    for f in reference_features:
        if f["start"] < len(f["sequence_ids"]) and (
                f["sequence_ids"][f["start"]] != 1 and not f["is_impossible"]):
            return "reference_start_off_context"
    if example.start_char >= 0:
        word_start = example.context_text.rfind(" ", 0, example.start_char) + 1
        word_end = example.context_text.find(
            " ", example.start_char + len(example.answer_text))
        word = example.context_text[word_start:word_end if word_end >= 0
                                    else None]
        from data_prep import text as text_lib

        if len(text_lib.preprocess_text(word, ours_tok.do_lower_case)) != len(
                word):
            return "coarse_offsets_here"
    return "unexplained"


def compare_features(examples, ours, reference, ours_tok, tokenizer,
                     max_query_length):
    """Differences between this side's features and the reference's.

    Returns:
        `(differences, causes)`: differing features by field (and examples
        whose window counts differ), and differing examples by cause (see
        `_example_cause`); `unexplained` should not appear.
    """
    by_example = collections.defaultdict(list)
    for f in reference:
        by_example[f["example_index"]].append(f)
    mine = collections.defaultdict(list)
    for w, window in enumerate(ours.windows):
        mine[window.example_index].append(w)
    arrays = ours.arrays
    counts, causes = collections.Counter(), collections.Counter()
    for index in range(len(examples)):
        theirs, own = by_example.get(index, []), mine.get(index, [])
        differs = len(theirs) != len(own)
        counts["window_count"] += differs
        for w, f in zip(own, theirs):
            length = int(arrays["input_mask"][w].sum())
            ids = [int(x) for x in arrays["input_word_ids"][w][:length]]
            their_ids = [x for x in f["input_ids"]
                         if x != tokenizer.pad_token_id]
            checks = {
                "input_ids": ids != their_ids,
                "token_type_ids": [int(x) for x in arrays["input_type_ids"][
                    w][:length]] != f["token_type_ids"][:length],
                "start_end": (int(arrays["start_positions"][w]),
                              int(arrays["end_positions"][w]))
                != (f["start"], f["end"]),
                "is_impossible": int(arrays["is_impossible"][w])
                != f["is_impossible"]}
            for field, bad in checks.items():
                counts[field] += bad
                differs = differs or bad
        if differs:
            causes[_example_cause(examples[index], ours_tok, tokenizer,
                                  max_query_length, theirs)] += 1
    return {k: v for k, v in counts.items() if v}, dict(causes)


def features_parity(train_file, version_2, spm_file, hf_dir, max_seq_length,
                    doc_stride, max_query_length):
    from albert_tf.tasks import squad_reader
    from albert_tf.tasks.tokenization import Tokenizer

    examples, _ = squad_reader.read_examples(train_file, True, version_2)
    ours_tok = Tokenizer(spm_file)
    ours = squad_reader.convert_examples(examples, ours_tok, max_seq_length,
                                         doc_stride, max_query_length,
                                         is_training=True)
    tokenizer = reference_tokenizer(hf_dir)
    reference = reference_train_features(tokenizer, examples, max_seq_length,
                                         doc_stride)
    differences, causes = compare_features(examples, ours, reference,
                                           ours_tok, tokenizer,
                                           max_query_length)
    return {"examples": len(examples), "ours": len(ours.windows),
            "reference": len(reference), "differences": differences,
            "differing_examples_by_cause": causes}
