"""Hostile cases of the fine-tuning programs, their data and the Keras-native
text models: users' own files (a stray tab, another encoding, the Hugging
Face `datasets` layout of SQuAD), mistyped flags, outputs that would land
on inputs, and what a Keras user passes to `fit` and `predict`.

Each case asserts its outcome (one line naming the thing at fault, or a
correct result) and that the files that existed before are unchanged.
"""

import json
import os

import numpy as np
import pytest

from albert_tf.tasks import finetuning_jobs
from albert_tf.tasks import glue_reader
from albert_tf.tasks import race_reader
from albert_tf.tasks import squad_reader
from albert_tf.tasks.options import SquadOptions
from tests import tasks_testdata
from tests.hostile.common import Snapshot
from tests.hostile.common import assert_one_line_error
from tests.hostile.common import run_program


@pytest.fixture
def glue_dirs(tmp_path):
    return tasks_testdata.write_glue(str(tmp_path / "glue"))


def _one_line(error):
    message = str(error)
    assert "\n" not in message, message
    return message


# === GLUE files ===

def test_glue_row_with_a_stray_tab_names_file_and_line(glue_dirs):
    folder = glue_dirs["mrpc"]
    path = os.path.join(folder, "train.tsv")
    with open(path, "a", encoding="utf-8") as f:
        # A tab inside the first sentence shifts every later column.
        f.write("1\t15\t16\tHe said\tso.\tHe told us so.\n")
    before = Snapshot(folder)
    with pytest.raises(glue_reader.DataError) as error:
        glue_reader.read_examples("mrpc", folder, "train")
    message = _one_line(error.value)
    assert f"{path}:4" in message and "6 tab-separated columns" in message
    assert "expected 5" in message
    before.assert_unchanged()


def test_glue_row_cut_short_is_an_error_outside_qqp(glue_dirs):
    folder = glue_dirs["rte"]
    path = os.path.join(folder, "dev.tsv")
    with open(path, "a", encoding="utf-8") as f:
        f.write("2\tWho?\n")
    with pytest.raises(glue_reader.DataError, match=f"{path}:4: 2 tab-separated"):
        glue_reader.read_examples("rte", folder, "dev")
    # QQP's distributed files hold short rows: skipped and counted.
    _, skipped = glue_reader.read_examples("qqp", glue_dirs["qqp"], "dev")
    assert skipped["missing_columns"] == 1


def test_glue_file_not_utf8_names_its_line(glue_dirs):
    folder = glue_dirs["sst-2"]
    path = os.path.join(folder, "train.tsv")
    with open(path, "ab") as f:
        f.write("un film très beau\t1\n".encode("latin-1"))
    before = Snapshot(folder)
    with pytest.raises(glue_reader.DataError) as error:
        glue_reader.read_examples("sst-2", folder, "train")
    message = _one_line(error.value)
    assert f"{path}:4: not UTF-8" in message and "0xe8" in message
    before.assert_unchanged()


def test_glue_label_outside_the_task_names_file_and_line(glue_dirs):
    folder = glue_dirs["mnli"]
    path = os.path.join(folder, "train.tsv")
    with open(path, "a", encoding="utf-8") as f:
        f.write("\t".join(["2", "3", "3e", "fiction"] + ["(x)"] * 4 + [
            "A.", "B.", "entailed", "entailed"]) + "\n")
    with pytest.raises(glue_reader.DataError) as error:
        glue_reader.read_examples("mnli", folder, "train")
    message = _one_line(error.value)
    assert f"{path}:4" in message and "'entailed'" in message


@pytest.mark.parametrize("content", ["", "\n\n", "sentence\tlabel\n"])
def test_glue_empty_file_is_one_line(glue_dirs, content):
    folder = glue_dirs["sst-2"]
    path = os.path.join(folder, "dev.tsv")
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    with pytest.raises(glue_reader.DataError) as error:
        glue_reader.read_examples("sst-2", folder, "dev")
    message = _one_line(error.value)
    assert path in message and ("empty" in message or "no rows" in message)


# === SQuAD files ===

def _hf_records(official_path):
    """The `datasets` records of an official SQuAD file (what
    `load_dataset("squad").to_json` writes, one per question)."""
    with open(official_path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    records = []
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                records.append({
                    "id": qa["id"], "title": article["title"],
                    "context": paragraph["context"],
                    "question": qa["question"],
                    "answers": {
                        "text": [a["text"] for a in qa["answers"]],
                        "answer_start": [a["answer_start"]
                                         for a in qa["answers"]]}})
    return records


def _fields(examples):
    return [(e.qas_id, e.question_text, e.context_text, e.answer_text,
             e.start_char, e.is_impossible, e.answers) for e in examples]


@pytest.mark.parametrize("layout", ["json_lines", "json_list", "data_field"])
def test_squad_in_the_datasets_layout_reads_as_the_official(tmp_path, layout):
    official, _ = tasks_testdata.write_squad(str(tmp_path / "dev-v2.0.json"),
                                             version_2=True)
    records = _hf_records(official)
    path = str(tmp_path / "squad_v2.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        if layout == "json_lines":
            f.write("".join(json.dumps(r) + "\n" for r in records))
        else:
            json.dump(records if layout == "json_list" else {"data": records},
                      f)
    before = Snapshot(path)
    for training in (True, False):
        expected, _ = squad_reader.read_examples(official, training, True)
        examples, skipped = squad_reader.read_examples(path, training, True)
        assert _fields(examples) == _fields(expected) and not skipped
    # The evaluation reads the official nesting from it too.
    data, _ = squad_reader.load_dataset(path)
    assert [q["id"] for q in data[0]["paragraphs"][0]["qas"]] == [
        "q1", "q2", "q3"]
    before.assert_unchanged()


def test_squad_answer_start_outside_the_context_is_named(tmp_path):
    path, context = tasks_testdata.write_squad(
        str(tmp_path / "train.json"), extra_questions=[
            {"id": "far", "question": "Where?",
             "answers": [{"text": "Paris", "answer_start": 10_000}]}])
    with pytest.raises(squad_reader.DataError) as error:
        squad_reader.read_examples(path, is_training=False)
    message = _one_line(error.value)
    assert path in message and "'far'" in message
    assert "answer_start=10000 is outside" in message


def test_squad_datasets_record_missing_a_key_is_named(tmp_path):
    path = str(tmp_path / "train.jsonl")
    good = {"id": "a", "title": "t", "context": "Paris is big.",
            "question": "What?", "answers": {"text": ["Paris"],
                                             "answer_start": [0]}}
    bad = {k: v for k, v in good.items() if k != "question"}
    bad["id"] = "b"
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(squad_reader.DataError) as error:
        squad_reader.read_examples(path, is_training=True)
    message = _one_line(error.value)
    assert f"{path}: record 2 lacks 'question'" in message


def test_squad_question_id_used_twice_is_named(tmp_path):
    path, _ = tasks_testdata.write_squad(
        str(tmp_path / "dev.json"), extra_questions=[
            {"id": "q1", "question": "Again?", "answers": []}])
    with pytest.raises(squad_reader.DataError, match="id 'q1' is used twice"):
        squad_reader.read_examples(path, is_training=False)


def test_squad_offsets_in_bytes_not_characters_are_refused(tmp_path):
    """A file whose answer_start counts something else (bytes, words):
    every answer misses its text, which would train on nothing."""
    path, context = tasks_testdata.write_squad(str(tmp_path / "train.json"))
    with open(path, encoding="utf-8") as f:
        payload = json.load(f)
    for qa in payload["data"][0]["paragraphs"][0]["qas"]:
        for answer in qa["answers"]:
            answer["answer_start"] = len(
                context[:answer["answer_start"]].encode("utf-8")) + 1
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f)
    with pytest.raises(squad_reader.DataError, match="in 2 of 2 questions the "
                       "answer text is not the context at answer_start"):
        squad_reader.read_examples(path, is_training=True)


def test_squad_file_not_utf8_names_its_line(tmp_path):
    path = str(tmp_path / "train.json")
    with open(path, "wb") as f:
        f.write(b'{"data": [\n{"title": "caf\xe9"}]}\n')
    with pytest.raises(squad_reader.DataError, match=f"{path}:2: not UTF-8"):
        squad_reader.read_examples(path, is_training=True)


# === RACE folders ===

def test_race_files_outside_the_level_folders_are_named(tmp_path):
    root = str(tmp_path / "RACE")
    os.makedirs(os.path.join(root, "train"))
    with open(os.path.join(root, "train", "1.txt"), "w") as f:
        json.dump(tasks_testdata.race_record("1.txt"), f)
    with pytest.raises(race_reader.DataError) as error:
        race_reader.read_examples(root, "train")
    message = _one_line(error.value)
    assert os.path.join(root, "train", "high") in message
    assert "must be in those level folders" in message


@pytest.mark.parametrize("content,expected", [
    ("[1, 2]", "must hold one RACE article"),
    (json.dumps(dict(tasks_testdata.race_record("x"), options="abcd")),
     "'options' must be a list"),
    (json.dumps(dict(tasks_testdata.race_record("x"),
                     options=[["a", "b", "c", 4], ["a", "b", "c", "d"]])),
     "question 0: expected a list of 4 option strings"),
    (json.dumps(dict(tasks_testdata.race_record("x"), article=None)),
     "'article' must be a string"),
])
def test_race_file_of_another_layout_is_named(tmp_path, content, expected):
    root = tasks_testdata.write_race(str(tmp_path / "RACE"))
    path = os.path.join(root, "dev", "middle", "middle2.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    before = Snapshot(root)
    with pytest.raises(race_reader.DataError) as error:
        race_reader.read_examples(root, "dev")
    message = _one_line(error.value)
    assert path in message and expected in message
    before.assert_unchanged()


# === Programs: flags and outputs, before TensorFlow loads ===

@pytest.mark.parametrize("module,flags,named", [
    ("albert_apps.run_squad", ["--doc_stride=0", "--do_train",
                               "--train_file=x.json"], "--doc_stride"),
    ("albert_apps.run_squad", ["--max_answer_length=-3", "--do_predict",
                               "--predict_file=x.json"],
     "--max_answer_length"),
    ("albert_apps.run_squad", ["--na_prob_threshold=nan", "--do_predict",
                               "--predict_file=x.json"],
     "--na_prob_threshold"),
    ("albert_apps.run_classifier", ["--task_name=mrpc", "--data_dir=x",
                                    "--do_train", "--max_seq_length=2"],
     "--max_seq_length"),
    ("albert_apps.run_race", ["--data_dir=x", "--do_train",
                              "--num_choices=1"], "--num_choices"),
])
def test_out_of_range_flags_are_one_line(tmp_path, module, flags, named):
    out = tmp_path / "run"
    result = run_program(module, f"--output_dir={out}", *flags)
    assert_one_line_error(result, named)
    assert not out.exists()


def test_output_dir_that_is_a_file_is_refused_untouched(tmp_path):
    taken = tmp_path / "results.txt"
    taken.write_text("a user's notes\n")
    before = Snapshot(taken)
    result = run_program(
        "albert_apps.run_classifier", "--task_name=mrpc",
        f"--data_dir={tmp_path}", "--do_train", f"--output_dir={taken}")
    assert_one_line_error(result, "--output_dir", str(taken), "is a file")
    before.assert_unchanged()


def test_predictions_would_overwrite_the_predict_file_is_refused(tmp_path):
    """`--predict_file=<output_dir>/predictions.json`: the run's
    predictions must not replace the questions they answer."""
    out = tmp_path / "run"
    path, _ = tasks_testdata.write_squad(str(out / "predictions.json"))
    before = Snapshot(out)
    options = SquadOptions(output_dir=str(out), predict_file=path,
                           do_predict=True)
    with pytest.raises(ValueError) as error:
        finetuning_jobs.run_squad(options)
    message = _one_line(error.value)
    assert "--output_dir" in message and path in message
    before.assert_unchanged()


# === Keras-native models: what Keras users pass ===

@pytest.fixture(scope="module")
def text_models(albert_spm_model):
    """A tiny classifier (pairs), a regressor and a masked LM (shared encoder)."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertEncoder
    from albert_tf.tasks.masked_lm import AlbertMaskedLM
    from albert_tf.tasks.text_models import AlbertTextClassifier

    encoder = AlbertEncoder(AlbertConfig.from_preset("tiny", vocab_size=48))
    return {
        "classifier": AlbertTextClassifier(encoder, 3, spm_model=albert_spm_model,
                                           seq_length=16),
        "regressor": AlbertTextClassifier(encoder, 1, spm_model=albert_spm_model,
                                          seq_length=16),
        "masked_lm": AlbertMaskedLM(encoder, spm_model=albert_spm_model,
                                    seq_length=16),
    }


def test_predict_on_an_empty_list_gives_an_empty_result(text_models):
    assert text_models["classifier"].predict([]).shape == (0, 3)
    assert text_models["regressor"].predict(()).shape == (0, 1)
    empty = text_models["masked_lm"].predict(np.array([], dtype=str))
    assert empty.shape == (0, 20, 48)
    assert text_models["masked_lm"].fill_mask([]) == []


@pytest.mark.parametrize("x,y,named", [
    ([1, 2], [0, 1], "x[0] must be a string"),
    (["a", "b", "c"], [0, 1], "Received: 3 texts and 2 labels"),
    ([["a", "b"], ["c"]], [0, 1], "pair of texts of different lengths"),
    ([["a", "b"], ["c", "d"], ["e"]], [0, 1, 2], "x[0] must be a string"),
    ("one text", [0], "not one string"),
    (["a", "b"], ["yes", "no"], "y must hold numbers"),
    (["a", "b"], [0, 3], "class indices in 0..2. Received: 3"),
    (["a", "b"], [[0], [1, 2]], "y must be a rectangular"),
    ([b"\xff\xfe", "b"], [0, 1], "x[0] is not UTF-8 text"),
])
def test_wrong_texts_or_labels_are_one_value_error(text_models, x, y, named):
    model = text_models["classifier"]
    model.compile()
    with pytest.raises(ValueError) as error:
        model.fit(x, y, epochs=1, verbose=0)
    assert named in _one_line(error.value)


def test_masked_lm_wrong_texts_are_one_value_error(text_models):
    model = text_models["masked_lm"]
    model.compile()
    with pytest.raises(ValueError, match=r"x\[1\] must be a string"):
        model.fit(["a text", 7], verbose=0)
    with pytest.raises(ValueError, match="texts must be a flat list"):
        text_models["masked_lm"].fill_mask(np.array([["a [MASK]"]]))


@pytest.mark.slow
def test_readme_example_fits_python_lists_tuples_arrays_and_tensors(
        text_models):
    """The README's example, as typed, and the other containers Keras users
    pass: tuples, NumPy arrays of str/objects, tensors, pairs."""
    import tensorflow as tf

    model = text_models["classifier"]
    model.compile(learning_rate=3e-5, num_train_steps=1000)
    texts, labels = ["a fine film", "a dull film"], [1, 0]
    history = model.fit(texts, labels, batch_size=32, epochs=3, verbose=0,
                        validation_data=(tuple(texts), tuple(labels)))
    assert len(history.history["val_loss"]) == 3
    model.fit(tf.constant(texts), tf.constant(labels), verbose=0)
    for x in (np.array(texts), np.array(texts, object), tuple(texts),
              (texts, ["so fine", "so dull"])):
        assert model.predict(x, verbose=0).shape == (2, 3)
    assert len(model.evaluate(np.array(texts), labels, verbose=0)) == 2


# === A real fine-tuning run ===

@pytest.mark.slow
def test_run_classifier_exports_beside_an_existing_version_untouched(
        tmp_path):
    """An export folder that already serves version 1 of the model and
    holds a user's notes: the run adds version 2 and changes nothing."""
    from albert_tf import AlbertConfig
    from albert_tf import AlbertPretrainer
    from albert_tf.training import model_dir as model_dir_lib

    model_dir = str(tmp_path / "pretrained")
    config = AlbertConfig.from_preset("tiny", vocab_size=600,
                                      num_hidden_layers=1,
                                      max_position_embeddings=32)
    model_dir_lib.save_model_dir(AlbertPretrainer(config), model_dir,
                                 tasks_testdata.spm_model_path())
    data_dir = tasks_testdata.write_glue(str(tmp_path / "glue"))["mrpc"]
    serving = tmp_path / "serving"
    (serving / "albert_mrpc" / "1" / "variables").mkdir(parents=True)
    (serving / "albert_mrpc" / "1" / "saved_model.pb").write_bytes(b"v1")
    (serving / "albert_mrpc" / "NOTES.md").write_text("served since May\n")
    before = Snapshot(serving, data_dir, model_dir)
    result = run_program(
        "albert_apps.run_classifier", "--task_name=MRPC",
        f"--data_dir={data_dir}", f"--init_checkpoint={model_dir}",
        f"--output_dir={tmp_path / 'run'}", f"--export_dir={serving}",
        "--do_train", "--max_seq_length=16", "--train_batch_size=2",
        "--train_step=1", "--warmup_step=0", "--save_checkpoints_steps=1",
        "--iterations_per_loop=1", "--jit_compile=false")
    assert result.returncode == 0, result.stderr[-3000:]
    before.assert_unchanged()
    assert sorted(os.listdir(serving / "albert_mrpc")) == ["1", "2", "NOTES.md"]
    assert (serving / "albert_mrpc" / "2" / "saved_model.pb").exists()
    assert not [n for n in os.listdir(serving) if n.startswith(".staging")]


# === Cases found by a second hostile pass ===

def _squad_file(tmp_path, qas, version="1.1"):
    path = str(tmp_path / "train.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": version, "data": [{"title": "t", "paragraphs": [
            {"context": "The cat sat.", "qas": qas}]}]}, f)
    return path


def test_squad_v1_training_file_of_only_unanswerable_questions_is_refused(
        tmp_path):
    """Every question skipped (no answers, v1.1) used to give zero training
    examples and a run that "succeeded" with an untrained model."""
    path = _squad_file(tmp_path, [
        {"id": "a", "question": "Who?", "answers": []},
        {"id": "b", "question": "What?", "is_impossible": True,
         "answers": []}])
    before = Snapshot(path)
    with pytest.raises(squad_reader.DataError) as error:
        squad_reader.read_examples(path, is_training=True)
    message = _one_line(error.value)
    assert path in message and "no question to train on" in message
    assert "--version_2_with_negative" in message
    # Evaluation still reads them, and v2.0 trains on them.
    assert len(squad_reader.read_examples(path, is_training=False)[0]) == 2
    assert len(squad_reader.read_examples(path, True, True)[0]) == 2
    before.assert_unchanged()


@pytest.mark.parametrize("question, named", [
    # bool("false") is True: the question was silently unanswerable.
    ({"is_impossible": "false"}, "'is_impossible' must be true or false"),
    # 4.0 was reported as "outside its context of 12 characters".
    ({"answers": [{"text": "cat", "answer_start": 4.0}]},
     "answer_start must be a whole number"),
])
def test_squad_mistyped_field_is_named_not_misread(tmp_path, question, named):
    path = _squad_file(tmp_path, [
        {"id": "a", "question": "Who?",
         "answers": [{"text": "cat", "answer_start": 4}], **question}],
        version="2.0")
    before = Snapshot(path)
    with pytest.raises(squad_reader.DataError) as error:
        squad_reader.read_examples(path, True, True)
    message = _one_line(error.value)
    assert path in message and "'a'" in message and named in message
    before.assert_unchanged()


def test_glue_file_with_bom_and_windows_line_endings_reads_as_unix(glue_dirs):
    """A dev.tsv saved by Excel/Notepad: BOM, "\\r\\n", quotes kept as text
    (GLUE files are not CSV-quoted)."""
    path = os.path.join(glue_dirs["sst-2"], "dev.tsv")
    with open(path, "wb") as f:
        f.write(b'\xef\xbb\xbfsentence\tlabel\r\na "fine" film\t1\r\n\r\n'
                b'dull\t0\r\n')
    before = Snapshot(path)
    examples, skipped = glue_reader.read_examples("sst-2", glue_dirs["sst-2"], "dev")
    assert [(e.text_a, e.label) for e in examples] == [
        ('a "fine" film', "1"), ("dull", "0")] and not skipped
    before.assert_unchanged()


def test_text_with_a_lone_surrogate_is_one_value_error(text_models):
    """A `str` with no UTF-8 form (from `surrogateescape`) reached
    TensorFlow, which failed without naming the text."""
    for model, call in ((text_models["classifier"], "predict"),
                        (text_models["masked_lm"], "fill_mask")):
        with pytest.raises(ValueError) as error:
            getattr(model, call)(["fine", "a [MASK] \udcff"])
        assert "[1] is not valid text" in _one_line(error.value)


def test_generators_of_lists_or_numpy_strings_train_and_predict(text_models):
    """Keras takes generators of tensors only: a generator of lists or
    NumPy strings failed with "Invalid dtype: str352"."""
    model = text_models["regressor"]
    model.compile(learning_rate=1e-3, num_train_steps=4)

    def batches(kind):
        for _ in range(2):
            texts = ["alpha beta", "gamma é"]
            yield ((np.array(texts) if kind == "numpy" else texts),
                   [0.5, 1.0], [1.0, 0.5])

    for kind in ("numpy", "lists"):
        model.fit(batches(kind), epochs=1, steps_per_epoch=2, verbose=0)
    predicted = model.predict((t for t, _, _ in batches("lists")), verbose=0)
    assert predicted.shape == (4, 1)
    with pytest.raises(ValueError, match=r"x \(batch 0\)\[0\] must be a "
                                         "string"):
        model.fit(iter([([1, 2], [0.0, 1.0])]), epochs=1, steps_per_epoch=1,
                  verbose=0)
