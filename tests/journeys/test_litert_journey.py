"""Journey: a checkpoint -> `--format=litert` -> text served from a fresh
process by LiteRT (docs/on_device.md).

The guide's export command (made tiny: a random tiny ALBERT in a model
directory), then the guide's Python block, as written, in a new process
that imports nothing of this project (ai-edge-litert and tensorflow-text
only), on texts including empty, over-long and invalid UTF-8 ones; its
`pooled_output` is compared with the SavedModel of the same export.
"""

import json

import numpy as np
import pytest

from tests.journeys import common
from tests.journeys import documented

pytestmark = pytest.mark.slow

_TEXTS = ["ALBERT runs on phones.", "", "Café ÜBER: 1,000, 2,500 people!",
          "word " * 400]
# Appended to the guide's block: the same runner on more texts, one JSON
# line (invalid UTF-8 passed as bytes, `_INVALID`).
_INVALID = b"\xff\xfe broken \xc3("
_MORE = r'''
import json, sys
texts = json.loads(sys.argv[1]) + [b"\xff\xfe broken \xc3("]
print(json.dumps([encode(text=np.array([t], dtype=object))["pooled_output"][0]
                  .tolist() for t in texts]))
'''


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The guide's command on a tiny random model directory."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import model_dir
    from data_prep import vocab

    root = tmp_path_factory.mktemp("litert_journey")
    texts = [f"Sentence {i}: the model reads {i * 7 % 13} words, {i},{i}00 "
             "of them." for i in range(300)]
    proto = vocab.model_from_texts(texts, 300)
    spm_path = root / "spm.model"
    spm_path.write_bytes(proto)
    config = AlbertConfig.from_preset("tiny", vocab_size=300,
                                      num_hidden_layers=2,
                                      max_position_embeddings=128)
    pretrainer = AlbertPretrainer(config)
    rng = np.random.default_rng(3)
    for v in pretrainer.weights:
        v.assign(rng.normal(scale=0.2, size=v.shape).astype("float32"))
    model_dir.save_model_dir(pretrainer, str(root / "models/tiny"),
                             spm_model_file=str(spm_path))
    env = {"MODEL_DIR": "models/tiny", "EXPORT_DIR": root / "exports"}
    done = common.run(documented.command("--format=litert", env=env), root,
                      timeout=900)
    return root / "exports", done


def test_the_export_writes_the_tflite_beside_the_saved_models(exported):
    export_dir, done = exported
    assert (export_dir / "albert_litert/1/encoder.tflite").is_file()
    assert (export_dir / "albert/1/saved_model.pb").is_file()
    assert "litert_encoder:" in done.stdout


def test_a_fresh_process_serves_text_as_the_saved_model_does(exported):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    export_dir, _ = exported
    code = documented.code_block("InterpreterWithCustomOps(").replace(
        "$EXPORT_DIR", str(export_dir)) + _MORE
    # Nothing of this project is imported.
    assert "albert_tf" not in code and "from export" not in code
    pooled = np.array(common.fresh_python(code, json.dumps(_TEXTS)))
    assert pooled.shape[0] == len(_TEXTS) + 1
    assert np.all(np.isfinite(pooled))
    served = tf.saved_model.load(str(export_dir / "albert/1"))
    # The invalid UTF-8 text too: its ids are the SavedModel's.
    reference = served.signatures["serving_single"](text=tf.constant(
        [t.encode() for t in _TEXTS] + [_INVALID]))["pooled_output"].numpy()
    for got, want in zip(pooled, reference):
        cosine = got @ want / (np.linalg.norm(got) * np.linalg.norm(want))
        assert cosine >= 0.99, cosine
