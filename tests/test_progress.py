"""Progress bars on a terminal, log lines elsewhere."""

import io

from absl import logging

from foundation import progress
from tests import fixtures_pretraining


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_interactive_follows_the_stream():
    assert progress.interactive(_Terminal())
    assert not progress.interactive(io.StringIO())
    closed = io.StringIO()
    closed.close()
    assert not progress.interactive(closed)


def test_a_disabled_bar_draws_nothing(capsys):
    with progress.bar(total=3, description="x", enabled=False) as bar:
        bar.update(2)
        bar.set_postfix_str("loss 1")
    assert capsys.readouterr().err == ""


def test_training_shows_a_bar_on_a_terminal(tmp_path, monkeypatch, capsys):
    lines = []
    monkeypatch.setattr(logging, "info", lambda msg, *args: lines.append(
        msg % args if args else msg))
    data = fixtures_pretraining.write_records(str(tmp_path / "train.tfrecord"), 16)
    monkeypatch.setattr(progress, "interactive", lambda stream=None: True)
    fixtures_pretraining.trainer(
        fixtures_pretraining.options(data, str(tmp_path / "bar"))).train()
    err = capsys.readouterr().err
    assert "train" in err and "4/4" in err and "examples/s" in err
    assert not any(line.startswith("step ") for line in lines)
    # The bar starts after the first, compiling step: its ETA leaves the
    # compiling out, and a line says what the first step took.
    assert "1/4" in err and "0/4" not in err
    assert any(line.startswith("The first step (compiling included) took ")
               for line in lines)


def test_training_logs_lines_elsewhere(short_pretraining_run):
    # Not on a terminal: no bar; a line after the first step (it compiles:
    # no ETA from it), then at each checkpoint (every 2 steps) and the end.
    assert short_pretraining_run.stderr == ""
    lines = [line for line in short_pretraining_run.lines
             if line.startswith("step ")]
    assert [line.split(" (")[0] for line in lines] == [
        "step 1/4", "step 2/4", "step 4/4"]
    assert "compiling included" in lines[0] and "ETA after warm-up" in lines[0]
    assert "ETA 0:00:0" in lines[-1]


def test_data_prep_shows_a_bar_on_a_terminal(tmp_path, monkeypatch, capsys,
                                             corpus_files, spm_model_path):
    from data_prep import pipeline

    monkeypatch.setattr(progress, "interactive", lambda stream=None: True)
    pipeline.create_pretraining_data(
        corpus_files, str(tmp_path / "out.tfrecord"), spm_model_path,
        dupe_factor=1)
    err = capsys.readouterr().err
    assert "read" in err and "instances" in err and "100%" in err
