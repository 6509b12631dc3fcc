"""The serving guide's REST payloads (docs/serving.md), pushed through the
exported signatures."""

import json
import os

import pytest

from tools import rest_examples


@pytest.mark.parametrize("index", range(len(rest_examples.EXAMPLES)))
def test_documented_payload_returns_what_is_documented(
        index, exported_albert, loaded_serving_model):
    example = rest_examples.EXAMPLES[index]
    assert example.request.get("signature_name",
                               "serving_default") == example.signature
    # A JSON round trip: exactly what a client would send.
    request = json.loads(json.dumps(example.request))
    response = rest_examples.predict(exported_albert.paths["serving"], request,
                                     loaded=loaded_serving_model)
    json.dumps(response)  # the response is plain JSON
    dims = {"H": exported_albert.pretrainer.config.hidden_size,
            "K": exported_albert.top_k}
    rest_examples.check_response(response, example.expect, dims)
    if "T" in dims:  # the dynamic length: padded to 8s, capped
        t_max = exported_albert.max_seq_length
        assert 8 <= dims["T"] <= t_max
        assert dims["T"] % 8 == 0 or dims["T"] == t_max


def test_check_response_binds_free_names_once():
    dims = {"H": 2}
    rest_examples.check_response({"a": [[1, 2]] * 3, "b": [0] * 3},
                                 {"a": ["T", "H"], "b": ["T"]}, dims)
    assert dims == {"H": 2, "T": 3}
    with pytest.raises(AssertionError, match="shape"):
        rest_examples.check_response({"a": [[1, 2]] * 3, "b": [0] * 4},
                                     {"a": ["T", "H"], "b": ["T"]}, {"H": 2})


def test_left_out_text_b_is_the_signature_default(exported_albert,
                                                  loaded_serving_model):
    path = exported_albert.paths["serving"]
    defaults = rest_examples.signature_defaults(path, "serving_default")
    assert list(defaults) == ["text_b"] and defaults["text_b"].shape == (0,)
    without = rest_examples.predict(
        path, {"instances": [{"text": "ka to"}]}, loaded=loaded_serving_model)
    with_empty = rest_examples.predict(
        path, {"instances": [{"text": "ka to", "text_b": ""}]},
        loaded=loaded_serving_model)
    assert without == with_empty
    single = rest_examples.predict(
        path, {"signature_name": "serving_single", "instances": ["ka to"]},
        loaded=loaded_serving_model)
    assert single == without
    assert rest_examples.signature_defaults(path, "serving_single") == {}
    with pytest.raises(rest_examples.RestError, match="invalid name"):
        rest_examples.predict(path, {"inputs": {"txt": ["a"]}},
                              loaded=loaded_serving_model)
    with pytest.raises(rest_examples.RestError, match="Missing input"):
        rest_examples.predict(
            path, {"signature_name": "sop", "inputs": {"text": ["a"]}},
            loaded=loaded_serving_model)


def test_serving_guide_is_rendered_from_the_examples():
    text = rest_examples.render_markdown()
    assert "docker run" in text and "tensorflow/serving" in text
    assert "MODEL_NAME=albert" in text and "target=/models/albert" in text
    for example in rest_examples.EXAMPLES:
        assert json.dumps(example.request, ensure_ascii=False) in text
    # The guide carries the section's exact payloads.
    guide = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "docs", "serving.md")
    with open(guide, encoding="utf-8") as f:
        content = f.read()
    assert "v1/models/albert:predict" in content
    for example in rest_examples.EXAMPLES:
        assert json.dumps(example.request,
                          ensure_ascii=False) in content, example.title
