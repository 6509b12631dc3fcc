import os
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.convert import safetensors_io
from albert_tf.training import model_dir

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "albert_tf.convert_checkpoint", *args],
        cwd=_ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_cli_converts_and_reports_bad_inputs(tmp_path, random_pretrainer,
                                             assert_same_model, albert_spm_model):
    model = random_pretrainer(num_hidden_groups=2, inner_group_num=2)
    ours = str(tmp_path / "ours")
    model_dir.save_model_dir(model, ours, spm_model_file=albert_spm_model)
    hf = str(tmp_path / "hf")
    result = _cli("--source=albert_tf", f"--input={ours}", f"--output_dir={hf}",
                  "--target=huggingface")
    assert result.returncode == 0, result.stderr
    assert "80 tensors mapped" in result.stderr
    from albert_tf.convert.pretrained import load_pretrained
    assert_same_model(model, load_pretrained(hf))

    # A tensor with a wrong shape: the CLI fails, names it and writes nothing.
    path = os.path.join(hf, "model.safetensors")
    tensors = safetensors_io.load_file(path)
    tensors["albert.pooler.bias"] = np.zeros(5, np.float32)
    safetensors_io.save_file(tensors, path, metadata={"format": "pt"})
    # The program's work in this process: a ValueError, which the program
    # prints as one line with exit status 1 (as a command line:
    # test_huggingface.py's corrupt weights).
    from albert_tf import convert_checkpoint as program
    from albert_tf.convert.options import ConvertOptions

    out = str(tmp_path / "out")
    with pytest.raises(ValueError) as error:
        program.convert(ConvertOptions(source="huggingface", input=hf,
                                       output_dir=out))
    assert "'albert.pooler.bias'" in str(error.value)
    assert "[5]" in str(error.value) and "[32]" in str(error.value)
    assert sorted(os.listdir(tmp_path)) == ["hf", "ours"]
