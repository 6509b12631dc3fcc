"""The NumPy line chart, the PNG writer and the event-file reader."""

import numpy as np
import tensorflow as tf

from tools import plot


def _write_scalars(writer, step, scalars):
    # What training writes: one float32 scalar tensor a tag and step.
    with writer.as_default(step=step):
        for name, value in scalars.items():
            tf.summary.write(name, tf.constant(value, tf.float32))
    writer.flush()


def test_png_round_trips_through_a_decoder(tmp_path):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (7, 11, 3), dtype=np.uint8)
    path = tmp_path / "x.png"
    plot.write_png(str(path), image)
    decoded = tf.io.decode_png(path.read_bytes(), channels=3).numpy()
    np.testing.assert_array_equal(decoded, image)


def test_line_chart_draws_series_labels_and_legend():
    panels = [
        dict(title="loss", series=[dict(label="train", x=[0, 50, 100],
                                        y=[3.0, 2.0, 1.5], color=plot.BLUE)]),
        dict(title="accuracy", series=[
            dict(label="eval", x=[50, 100], y=[0.2, 0.4], color=plot.ORANGE,
                 markers=True),
            dict(label="chance", x=[50, 100], y=[0.5, 0.5], color=plot.GRAY,
                 dash=6)]),
        dict(title="empty", series=[]),
    ]
    image = plot.line_chart(panels, columns=2, panel_size=(300, 200))
    assert image.shape == (400, 600, 3) and image.dtype == np.uint8
    colors = {tuple(c) for c in image.reshape(-1, 3)}
    for color in (plot.BLUE, plot.ORANGE, plot.GRAY, plot.BLACK):
        assert color in colors
    # Each series is drawn in its own panel: blue left, orange right.
    blue = np.all(image == plot.BLUE, axis=-1)
    orange = np.all(image == plot.ORANGE, axis=-1)
    assert blue[:200, :300].any() and not blue[:, 300:].any()
    assert orange[:200, 300:].any() and not orange[:, :300].any()
    # A decreasing series: its left end is drawn higher than its right end.
    rows, cols = np.nonzero(blue[:150, 100:290])
    assert rows[cols.argmin()] < rows[cols.argmax()]


def test_single_point_and_flat_series_do_not_fail():
    image = plot.line_chart([dict(title="one", series=[
        dict(label="a", x=[5], y=[1.0]), dict(label="b", x=[5, 6], y=[2, 2])])],
        columns=1)
    assert image.shape == (300, 420, 3)


def test_text_is_drawn_in_the_image():
    image = np.full((20, 60, 3), 255, np.uint8)
    plot.draw_text(image, 2, 2, "Ab1%", plot.BLACK, scale=2)
    assert (image == 0).any()
    assert plot.text_width("Ab1%", 2) == 4 * 8 - 2


def test_read_scalars_reads_scalar_summaries(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    _write_scalars(writer, 10, {"loss": 2.5, "acc": 0.25})
    _write_scalars(writer, 20, {"loss": 1.5, "acc": 0.5})
    _write_scalars(writer, 20, {"loss": 1.25})  # resumed: last wins
    writer.close()
    scalars = plot.read_scalars(str(tmp_path))
    assert scalars["loss"] == [(10, 2.5), (20, 1.25)]
    assert scalars["acc"] == [(10, 0.25), (20, 0.5)]
    assert plot.read_scalars(str(tmp_path / "missing")) == {}
