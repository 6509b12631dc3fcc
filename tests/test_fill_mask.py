"""The fill-mask function shared by the SavedModel and `AlbertMaskedLM`."""

import numpy as np
import tensorflow as tf

from albert_tf.layers import preprocessing
from albert_tf.tasks import fill_mask
from data_prep import vocab

TEXTS = ["the [MASK] fox [MASK] over", "hello [mask] world", "[MASK]"]


def test_matches_the_pretrainer_at_every_marker(random_pretrainer,
                                                albert_spm_model):
    pretrainer = random_pretrainer()
    sp_model = vocab.load_model(albert_spm_model)
    preprocessor = preprocessing.TextPreprocessor(
        sp_model.serialized_model_proto(), 16)
    answers = {dynamic: fill_mask.fill_mask_outputs(
        pretrainer, preprocessor, tf.constant(TEXTS), tf.constant(3), dynamic)
        for dynamic in (True, False)}
    out = answers[True]
    rows = [preprocessing.pack_ids(
        preprocessing.tokenize_with_masks_py(sp_model, text), None, 16)
        for text in TEXTS]
    inputs = {key: np.array([r[key] for r in rows], np.int32) for key in rows[0]}
    positions = np.full((3, 2), -1, np.int32)
    for i, ids in enumerate(inputs["input_word_ids"]):
        found = np.flatnonzero(ids == preprocessing.MASK_ID)
        positions[i, :len(found)] = found
    np.testing.assert_array_equal(out["mask_positions"], positions)
    # "[mask]" is text, not a marker: counted as dropped.
    np.testing.assert_array_equal(out["dropped_masks"], [0, 1, 0])
    inputs["masked_lm_positions"] = np.maximum(positions, 0)
    probabilities = tf.nn.softmax(pretrainer(inputs)["mlm_logits"]).numpy()
    for i, j in zip(*np.nonzero(positions >= 0)):
        best = np.argsort(-probabilities[i, j])[:3]
        np.testing.assert_array_equal(out["top_k_ids"][i, j], best)
        np.testing.assert_allclose(out["top_k_probabilities"][i, j],
                                   probabilities[i, j, best], atol=1e-6)
        assert [p.decode() for p in out["top_k_pieces"][i, j].numpy()] == [
            sp_model.id_to_piece(int(b)) for b in best]
    assert list(out["top_k_ids"][1, 0]) == [-1, -1, -1]
    # Padding to the batch's longest row or to max_seq_length: same answers.
    for key in ("mask_positions", "top_k_ids", "dropped_masks"):
        np.testing.assert_array_equal(answers[False][key], out[key])
    np.testing.assert_allclose(answers[False]["top_k_probabilities"],
                               out["top_k_probabilities"], atol=1e-6)


def test_an_empty_batch(random_pretrainer, albert_spm_model):
    preprocessor = preprocessing.TextPreprocessor(
        vocab.load_model(albert_spm_model).serialized_model_proto(), 16)
    out = fill_mask.fill_mask_outputs(
        random_pretrainer(), preprocessor, tf.constant([], tf.string), 4)
    assert out["top_k_pieces"].shape == (0, 0, 4)
    assert out["dropped_masks"].shape == (0,)
