"""`output_folder.claim_run`: a rerun is refused when the settings, or the
content of its inputs under the same names, changed since the run began."""

import json
import types

import pytest

from albert_tf.training import output_folder
from foundation import run_record
from foundation import safe_io


def _options(settings):
    return types.SimpleNamespace(run_program=lambda: "run_pretraining",
                                 run_settings=lambda: dict(settings))


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_inputs_rewritten_under_the_same_names_are_refused(tmp_path):
    records = tmp_path / "train.tfrecord"
    _write(records, b"records of one vocabulary")
    out = str(tmp_path / "out")
    options = _options({"--input_file": str(records)})
    inputs = {"--input_file": [str(records)]}
    output_folder.claim_run(out, options, inputs)
    with open(tmp_path / "out" / run_record.RUN_RECORD_NAME) as f:
        settings = json.load(f)["settings"]
    fingerprint = run_record.content_fingerprint([str(records)])
    assert settings["--input_file (content)"] == fingerprint
    output_folder.claim_run(out, options, inputs)  # The same content: fine.

    _write(records, b"records of another vocabulary")
    with pytest.raises(safe_io.OutputError) as refused:
        output_folder.claim_run(out, options, inputs)
    message = str(refused.value)
    assert message.startswith("--input_file: the content changed since this "
                              f"run started in --output_dir={out} (1 files")
    assert "\n" not in message


def test_other_settings_are_named_together_with_the_content(tmp_path):
    records = tmp_path / "a.tfrecord"
    _write(records, b"a")
    out = str(tmp_path / "out")
    output_folder.claim_run(out, _options({"--max_seq_length": 128}),
                            {"--input_file": [str(records)]})
    _write(records, b"b")
    with pytest.raises(safe_io.OutputError,
                       match="other inputs.*--input_file \\(content\\).*"
                             "--max_seq_length=128 there, 64 now"):
        output_folder.claim_run(out, _options({"--max_seq_length": 64}),
                                {"--input_file": [str(records)]})


def test_a_record_without_fingerprints_resumes_unchecked(tmp_path):
    records = tmp_path / "a.tfrecord"
    _write(records, b"a")
    out = tmp_path / "out"
    out.mkdir()
    # An earlier version's record: settings only.
    (out / run_record.RUN_RECORD_NAME).write_text(json.dumps(
        {"program": "run_pretraining",
         "settings": {"--input_file": str(records)}}))
    _write(records, b"rebuilt")
    output_folder.claim_run(str(out), _options({"--input_file": str(records)}),
                            {"--input_file": [str(records)]})
