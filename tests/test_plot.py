"""The matplotlib chart and the event-file reader."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import results
from tools import plot


def _image(path):
    return tf.io.decode_png(open(path, "rb").read(), channels=3).numpy()


def _has_color(image, color, tolerance=12):
    distance = np.abs(image.astype(int) - np.array(color)).max(axis=-1)
    return distance <= tolerance


def test_chart_draws_each_series_in_its_panel(tmp_path):
    panels = [
        dict(title="loss", log=True, series=[dict(
            label="train", x=[0, 50, 100], y=[3.0, 2.0, 1.5], color=plot.BLUE)]),
        dict(title="accuracy", series=[
            dict(label="eval", x=[50, 100], y=[0.2, 0.4], color=plot.ORANGE,
                 markers=True),
            dict(label="chance", x=[50, 100], y=[0.5, 0.5], color=plot.GRAY,
                 dash=True)]),
        dict(title="empty", series=[]),
    ]
    path = str(tmp_path / "curves.png")
    plot.save_chart(panels, path, columns=2, panel_size=(4, 3), dpi=50)
    image = _image(path)
    # Two rows of two 4 x 3 inch panels at 50 dpi.
    assert image.shape == (300, 400, 3)
    blue, orange = _has_color(image, plot.BLUE), _has_color(image, plot.ORANGE)
    assert blue[:150, :200].any() and not blue[:, 200:].any()
    assert orange[:150, 200:].any() and not orange[:, :200].any()
    assert _has_color(image, plot.GRAY)[:150, 200:].any()


def test_single_points_flat_series_and_bad_series(tmp_path):
    path = str(tmp_path / "x.png")
    plot.save_chart([dict(title="one", log=True, series=[
        dict(label="a", x=[5], y=[1.0]), dict(label="b", x=[5, 6], y=[0, 0])])],
        path, columns=1)
    assert _image(path).shape[2] == 3
    with pytest.raises(ValueError, match="'a' of panel 'bad' has 2 x values"):
        plot.save_chart([dict(title="bad", series=[
            dict(label="a", x=[1, 2], y=[1.0])])], path)


def test_read_scalars_reads_what_training_writes(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    results.write_scalars(writer, 10, {"loss": 2.5, "acc": 0.25})
    results.write_scalars(writer, 20, {"loss": 1.5, "acc": 0.5})
    results.write_scalars(writer, 20, {"loss": 1.25})  # resumed: last wins
    writer.close()
    scalars = plot.read_scalars(str(tmp_path))
    assert scalars["loss"] == [(10, 2.5), (20, 1.25)]
    assert scalars["acc"] == [(10, 0.25), (20, 0.5)]
    assert plot.read_scalars(str(tmp_path / "missing")) == {}


def test_log2_x_axis_spaces_doubling_sizes_evenly(tmp_path):
    # y falls from 1 to 0 between the first two sizes, then stays at 0: the
    # falling segment spans 1/3 of the drawn width on a log2 axis (16 -> 32
    # of 16 ... 128), 1/7 on a linear one.
    fractions = {}
    for xlog in (True, False):
        path = str(tmp_path / ("%s.png" % xlog))
        plot.save_chart([dict(title="sizes", xlabel="E", ylabel="accuracy",
                              xlog=xlog, series=[dict(
                                  label="a", x=[16, 32, 64, 128],
                                  y=[1.0, 0.0, 0.0, 0.0], color=plot.RED)])],
                        path, columns=1, panel_size=(6, 3), dpi=60)
        red = _has_color(_image(path), plot.RED)
        rows, columns = np.nonzero(red)
        drawn = columns.max() - columns.min()
        # Columns holding the segment's upper half (above the middle row).
        middle = (rows.min() + rows.max()) / 2
        upper = columns[rows < middle]
        fractions[xlog] = (upper.max() - columns.min()) / drawn
    assert fractions[True] == pytest.approx(1 / 6, abs=0.04)
    assert fractions[False] == pytest.approx(1 / 14, abs=0.04)


def test_an_svg_path_gets_the_same_text_each_time(tmp_path):
    panels = [dict(title="held-out accuracy", series=[dict(
        label="eval", x=[10, 20], y=[0.25, 0.5], color=plot.ORANGE,
        markers=True)])]
    first, second = str(tmp_path / "a.svg"), str(tmp_path / "b.SVG")
    plot.save_chart(panels, first, columns=1)
    plot.save_chart(panels, second, columns=1)
    text = open(first, encoding="utf-8").read()
    assert "<svg" in text and "held-out accuracy" in text  # text, not glyphs
    assert "#ff7f0e" in text  # ORANGE
    assert open(second, encoding="utf-8").read() == text


def test_the_format_follows_the_suffix_or_is_named(tmp_path):
    panels = [dict(title="one", series=[dict(label="a", x=[1], y=[1.0])])]
    with pytest.raises(ValueError,
                       match=r"\.png or \.svg.*Received: path='.*chart\.jpg'"):
        plot.save_chart(panels, str(tmp_path / "chart.jpg"))
    with open(tmp_path / "chart.bin", "wb") as f:
        plot.save_chart(panels, f)  # a file object: PNG
    assert _image(tmp_path / "chart.bin").shape[2] == 3
    with open(tmp_path / "chart.bin", "wb") as f:
        plot.save_chart(panels, f, image_format="svg")
    assert b"<svg" in (tmp_path / "chart.bin").read_bytes()
    with pytest.raises(ValueError, match="Received: image_format='gif'"):
        plot.save_chart(panels, str(tmp_path / "x.png"), image_format="gif")
