"""Training curves as a PNG or an SVG, drawn with matplotlib (Agg: no
display needed).

`read_scalars` reads the scalar summaries of a TensorBoard log folder (what
the trainer writes); `save_chart` draws panels of line series (steps on x,
a log scale for losses, a legend per panel) into a PNG, or into an SVG (text,
for charts kept in the repository), as the file's suffix says. Only the
reporting code imports this module; TensorBoard reads the same logs
interactively.
"""

import os

# Colors as RGB bytes (tests look for them in the image).
BLUE = (31, 119, 180)
ORANGE = (255, 127, 14)
GREEN = (44, 160, 44)
RED = (214, 39, 40)
GRAY = (150, 150, 150)

# File suffix -> the format written.
FORMATS = {".png": "png", ".svg": "svg"}
# SVG text that is the same for the same chart: fixed element ids, no date,
# and text kept as text rather than drawn glyphs.
_SVG_SETTINGS = {"svg.hashsalt": "albert-tf", "svg.fonttype": "none"}


def _rgb(color):
    return tuple(c / 255.0 for c in color)


def _format_of(path, image_format):
    """The format to write: `image_format`, else the path's suffix (a file
    object with no format given gets a PNG)."""
    if image_format is None and isinstance(path, (str, os.PathLike)):
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        if suffix not in FORMATS:
            raise ValueError("A chart is written as .png or .svg, chosen by "
                             "the file's suffix. Received: "
                             f"path={os.fspath(path)!r}")
        return FORMATS[suffix]
    image_format = image_format or "png"
    if image_format not in FORMATS.values():
        raise ValueError("image_format must be one of "
                         f"{sorted(FORMATS.values())}. Received: "
                         f"image_format={image_format!r}")
    return image_format


def save_chart(panels, path, columns=2, panel_size=(4.8, 3.4), dpi=100,
               image_format=None):
    """Draws panels of line series into a PNG or SVG file.

    Args:
        panels: a list of dicts: `title`, `series` (a list of dicts: `label`,
            `x`, `y`, optional `color` (RGB bytes), `markers` (bool), `dash`
            (bool)), optional `log` (a log-scale y axis, for losses),
            `xlabel` (default "step"), `ylabel` and `xlog` (a base-2
            log-scale x axis, for sizes that double).
        path: the file to write, or a binary file object; a path's
            suffix, `.png` or `.svg`, picks the format.
        columns: panels per row.
        panel_size: inches of one panel.
        dpi: pixels per inch.
        image_format: "png" or "svg" whatever the path (default: from the
            path's suffix; "png" for a file object).

    Raises:
        ValueError: a series whose `x` and `y` differ in length, a path
            with another suffix, or another `image_format`.
    """
    image_format = _format_of(path, image_format)
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    svg = image_format == "svg"
    with matplotlib.rc_context(_SVG_SETTINGS if svg else {}):
        rows = max(1, -(-len(panels) // columns))
        figure, axes = pyplot.subplots(
            rows, columns,
            figsize=(panel_size[0] * columns, panel_size[1] * rows),
            dpi=dpi, squeeze=False)
        try:
            for index, ax in enumerate(axes.flat):
                if index >= len(panels):
                    ax.set_visible(False)
                    continue
                _draw_panel(ax, panels[index])
            figure.tight_layout()
            figure.savefig(path, format=image_format,
                           metadata={"Date": None} if svg else None)
        finally:
            pyplot.close(figure)


def _draw_panel(ax, panel):
    ax.set_title(panel["title"])
    ax.set_xlabel(panel.get("xlabel", "step"))
    if panel.get("ylabel"):
        ax.set_ylabel(panel["ylabel"])
    ax.grid(True, color="#e4e4e4")
    drawn = False
    for series in panel["series"]:
        if len(series["x"]) != len(series["y"]):
            raise ValueError(
                f"Series {series['label']!r} of panel {panel['title']!r} has "
                f"{len(series['x'])} x values and {len(series['y'])} y values")
        if not series["x"]:
            continue
        ax.plot(series["x"], series["y"], label=series["label"],
                color=_rgb(series.get("color", BLUE)), linewidth=2,
                linestyle="--" if series.get("dash") else "-",
                marker="o" if series.get("markers") else None)
        drawn = True
    if drawn:
        if panel.get("log") and all(
                y > 0 for s in panel["series"] for y in s["y"]):
            ax.set_yscale("log")
        xs = sorted({x for s in panel["series"] for x in s["x"]})
        if panel.get("xlog") and xs[0] > 0:
            ax.set_xscale("log", base=2)
            # The sizes themselves, not powers of two, under the points.
            ax.set_xticks(xs, labels=["%g" % x for x in xs])
            ax.minorticks_off()
        ax.legend(loc="best", fontsize="small")
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center",
                transform=ax.transAxes, color=_rgb(GRAY))


def read_scalars(logdir):
    """Scalar summaries of the event files in `logdir`.

    Returns:
        A dict `tag -> [(step, value), ...]` sorted by step; a step written
        twice (a resumed run) keeps its last value.
    """
    import tensorflow as tf

    values = {}
    if not tf.io.gfile.isdir(logdir):
        return {}
    files = sorted(f for f in tf.io.gfile.listdir(logdir)
                   if "tfevents" in f)
    for name in files:
        dataset = tf.data.TFRecordDataset(os.path.join(logdir, name))
        try:
            for record in dataset:
                event = tf.compat.v1.Event.FromString(record.numpy())
                for value in event.summary.value:
                    if value.HasField("tensor"):
                        number = float(tf.make_ndarray(value.tensor))
                    else:
                        number = float(value.simple_value)
                    values.setdefault(value.tag, {})[int(event.step)] = number
        except tf.errors.DataLossError:
            pass  # A file being written: keep what was read.
    return {tag: sorted(steps.items()) for tag, steps in values.items()}
