"""The model server commands every export prints (`export.serving_command`):
the XLA flag exactly when an int8 model was written, a config file when
several SavedModels were, the base path and the REST port."""

import ast
import os
import shlex

import pytest

XLA_FLAG = "--xla_cpu_compilation_enabled=true"


def _commands(block):
    """`(server argv, docker argv)` of a block."""
    lines = [line.strip() for line in block.splitlines()]
    server = [shlex.split(line) for line in lines
              if line.startswith("tensorflow_model_server ")]
    docker = [shlex.split(line) for line in lines
              if line.startswith("docker run ")]
    assert len(server) == 1 and len(docker) == 1, block
    return server[0], docker[0]


def test_one_model_is_served_by_name_and_base_path(tmp_path):
    from export import serving_command

    block = serving_command.command_block(str(tmp_path / "a b"), ["clf"],
                                          xla=False)
    server, docker = _commands(block)
    base = os.path.join(str(tmp_path / "a b"), "clf")
    assert "--model_name=clf" in server
    assert "--model_base_path=" + base in server
    assert "--rest_api_port=8501" in server
    assert XLA_FLAG not in server + docker
    assert "8501:8501" in docker and "MODEL_NAME=clf" in docker
    assert "type=bind,source=%s,target=/models/clf" % base in docker
    assert docker[docker.index("-t") + 1] == "tensorflow/serving:latest"


def test_odd_paths_are_quoted_in_the_commands_and_the_config(tmp_path):
    """A folder name with spaces, quotes and a backslash reaches the model
    server whole: shell-quoted in the commands, escaped in the config."""
    from export import serving_command

    base = str(tmp_path / "it's a \"b\\c\" dir")
    server, docker = _commands(serving_command.command_block(
        base, ["a", "b"], xla=False,
        config_file=os.path.join(base, "a", "1", "models.config")))
    assert server[-1] == "--model_config_file=" + os.path.join(
        base, "a", "1", "models.config")
    assert "type=bind,source=%s,target=%s" % (base, base) in docker
    text = serving_command.model_config(base, ["a", "b"])
    # Text-format strings escape as Python's literals do.
    paths = [ast.literal_eval(line.split(":", 1)[1].strip())
             for line in text.splitlines() if "base_path:" in line]
    assert paths == [os.path.join(base, "a"), os.path.join(base, "b")]


def test_an_int8_export_gets_the_flag_in_both_commands(tmp_path):
    from export import serving_command

    server, docker = _commands(serving_command.command_block(
        str(tmp_path), ["clf"], xla=True))
    assert server[-1] == XLA_FLAG
    # After the image name: an argument of the model server, not of docker.
    assert docker.index(XLA_FLAG) > docker.index("-t") + 1


def test_flag_exactly_when_the_program_wrote_int8(
        exported_albert, reduced_precision_exports):
    from export import pretrained_export

    float32 = pretrained_export.serving_block(
        exported_albert.export_dir, "albert", exported_albert.paths)
    int8_serving = reduced_precision_exports["int8"]
    int8_dir = os.path.dirname(os.path.dirname(int8_serving))
    int8_paths = {key: os.path.join(int8_dir, name, "1") for key, name in
                  pretrained_export.model_names("albert").items()}
    int8 = pretrained_export.serving_block(int8_dir, "albert", int8_paths)
    assert XLA_FLAG not in float32
    for command in _commands(int8):
        assert XLA_FLAG in command


def test_several_saved_models_share_a_config_file_of_the_version(
        exported_albert):
    from export import pretrained_export
    from export import serving_command

    block = pretrained_export.serving_block(
        exported_albert.export_dir, "albert", exported_albert.paths)
    server, docker = _commands(block)
    config = os.path.join(exported_albert.paths["serving"],
                          serving_command.CONFIG_FILE)
    assert "--model_config_file=" + config in server
    assert "--model_config_file=" + config in docker
    # The export folder is mounted where the config's paths point.
    base = os.path.abspath(exported_albert.export_dir)
    assert "type=bind,source=%s,target=%s" % (base, base) in docker
    with open(config, encoding="utf-8") as f:
        text = f.read()
    for name in ("albert", "albert_encoder", "albert_preprocessor"):
        assert 'name: "%s"' % name in text
        assert 'base_path: "%s"' % os.path.join(base, name) in text
    assert "litert" not in text


def test_a_classifier_export_is_one_model(exported_tasks):
    from export import serving_command

    folder = exported_tasks.paths["albert_classifier"]
    block = serving_command.block_for_export(
        exported_tasks.export_dir, {"albert_classifier": folder})
    server, _ = _commands(block)
    assert "--model_name=albert_classifier" in server
    assert not any(arg.startswith("--model_config_file") for arg in server)
    assert XLA_FLAG not in block


@pytest.mark.slow
def test_export_program_prints_the_commands_last(
        exported_albert, tmp_path, capsys):
    from export import export_saved_model
    from tests.fixtures_export import export_options

    export_saved_model.export(export_options(
        "--checkpoint=" + exported_albert.model_dir,
        "--export_dir=" + str(tmp_path), "--save_keras=false",
        "--max_seq_length=16", "--serving_dtype=int8"))
    out = capsys.readouterr().out
    server, docker = _commands(out)
    assert out.index("docker run") > out.index("serving: ")
    assert XLA_FLAG in server and XLA_FLAG in docker
    assert os.path.isfile(os.path.join(
        str(tmp_path), "albert", "1", "assets.extra", "models.config"))


@pytest.mark.slow
def test_an_int8_classifier_export_logs_the_flag(exported_tasks, tmp_path,
                                                 monkeypatch):
    from export import finetuned_exports

    logged = []

    class Log:
        @staticmethod
        def info(message, *args):
            logged.append(message % args)

    monkeypatch.setattr(finetuned_exports, "logging", Log)
    finetuned_exports.export_classifier(
        exported_tasks.classifier, exported_tasks.spm_path, str(tmp_path),
        labels=["a", "b", "c"], max_seq_length=16, serving_dtype="int8")
    blocks = [text for text in logged if "tensorflow_model_server" in text]
    assert len(blocks) == 1
    server, docker = _commands(blocks[0])
    assert "--model_name=albert_classifier" in server
    assert XLA_FLAG in server and XLA_FLAG in docker
