"""Training curves as a PNG with NumPy only (no plotting library needed).

`read_scalars` reads the scalar summaries of a TensorBoard log folder (what
the trainer writes); `line_chart` draws panels of line series
into an RGB array with a small built-in bitmap font; `write_png` writes the
array with `zlib` and `struct`.
"""

import os
import struct
import zlib

import numpy as np

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
GRAY = (150, 150, 150)
LIGHT = (228, 228, 228)
BLUE = (31, 119, 180)
ORANGE = (255, 127, 14)
GREEN = (44, 160, 44)
RED = (214, 39, 40)

# 3x5 glyphs, one string of 15 bits (rows top to bottom) per character.
_GLYPHS = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001001010010", "8": "111101111101111",
    "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111",
    "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101",
    "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011",
    "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101",
    "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    ".": "000000000000010", "-": "000000111000000", ":": "000010000010000",
    "%": "101001010100101", "/": "001001010100100", "(": "010100100100010",
    ")": "010001001001010", "_": "000000000000111", "=": "000111000111000",
    ",": "000000000010100", "+": "000010111010000", " ": "0" * 15,
}


def text_width(text, scale=2):
    """Pixel width of `text` drawn with `draw_text`."""
    return max(len(text) * 4 * scale - scale, 0)


def draw_text(image, x, y, text, color=BLACK, scale=2):
    """Draws `text` (upper-cased; unknown characters as blanks) with its top
    left corner at `(x, y)`; pixels outside the image are dropped."""
    height, width = image.shape[:2]
    for index, char in enumerate(str(text).upper()):
        bits = _GLYPHS.get(char, _GLYPHS[" "])
        left = x + index * 4 * scale
        for bit in range(15):
            if bits[bit] != "1":
                continue
            top, col = y + (bit // 3) * scale, left + (bit % 3) * scale
            y0, y1 = max(top, 0), min(top + scale, height)
            x0, x1 = max(col, 0), min(col + scale, width)
            if y0 < y1 and x0 < x1:
                image[y0:y1, x0:x1] = color


def _draw_line(image, x0, y0, x1, y1, color, thickness=2, dash=0):
    """A straight segment, sampled densely; `dash` > 0 draws dashes."""
    height, width = image.shape[:2]
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    for i in range(n + 1):
        if dash and (i // dash) % 2:
            continue
        t = i / max(n, 1)
        x = int(round(x0 + (x1 - x0) * t))
        y = int(round(y0 + (y1 - y0) * t))
        half = thickness // 2
        ya, yb = max(y - half, 0), min(y - half + thickness, height)
        xa, xb = max(x - half, 0), min(x - half + thickness, width)
        if ya < yb and xa < xb:
            image[ya:yb, xa:xb] = color


def _format_number(value):
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return "%d" % round(value)
    if magnitude >= 10:
        return ("%.1f" % value).rstrip("0").rstrip(".")
    return ("%.3f" % value).rstrip("0").rstrip(".")


def _draw_panel(image, left, top, width, height, panel, scale):
    title = panel.get("title", "")
    series = [s for s in panel.get("series", []) if len(s["x"])]
    line_h = 6 * scale
    draw_text(image, left + (width - text_width(title, scale)) // 2, top,
              title, BLACK, scale)
    # Plot area, leaving room for the y labels, x labels and the legend.
    legend_rows = len(series)
    px0 = left + 11 * 4 * scale
    px1 = left + width - 4 * scale
    py0 = top + line_h + 2 * scale
    py1 = top + height - line_h * (legend_rows + 2)
    if px1 - px0 < 10 or py1 - py0 < 10:
        return
    image[py0:py1 + 1, px0] = BLACK
    image[py1, px0:px1 + 1] = BLACK
    if not series:
        draw_text(image, px0 + 4 * scale, (py0 + py1) // 2, "NO DATA", GRAY,
                  scale)
        return
    xs = np.concatenate([np.asarray(s["x"], np.float64) for s in series])
    ys = np.concatenate([np.asarray(s["y"], np.float64) for s in series])
    x_lo, x_hi = float(xs.min()), float(xs.max())
    y_lo, y_hi = float(np.nanmin(ys)), float(np.nanmax(ys))
    if panel.get("y_min") is not None:
        y_lo = min(y_lo, panel["y_min"])
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    if y_hi <= y_lo:
        y_lo, y_hi = y_lo - 0.5, y_hi + 0.5
    pad = 0.05 * (y_hi - y_lo)
    y_lo, y_hi = y_lo - pad, y_hi + pad

    def to_px(x, y):
        return (px0 + (x - x_lo) / (x_hi - x_lo) * (px1 - px0),
                py1 - (y - y_lo) / (y_hi - y_lo) * (py1 - py0))

    # Horizontal grid lines with their values.
    for i in range(5):
        value = y_lo + pad + (y_hi - y_lo - 2 * pad) * i / 4
        _, y = to_px(x_lo, value)
        y = int(round(y))
        image[y, px0 + 1:px1 + 1] = LIGHT
        label = _format_number(value)
        draw_text(image, px0 - text_width(label, scale) - 2 * scale,
                  y - 2 * scale, label, BLACK, scale)
    # x labels: the first and the last step, and the middle.
    for value in (x_lo, (x_lo + x_hi) / 2, x_hi):
        x, _ = to_px(value, y_lo)
        label = _format_number(round(value))
        lx = int(min(max(x - text_width(label, scale) / 2, px0), px1 -
                     text_width(label, scale)))
        draw_text(image, lx, py1 + 2 * scale, label, BLACK, scale)
        image[py1:py1 + scale + 1, int(x)] = BLACK
    draw_text(image, px1 - text_width("STEP", scale), py1 + 2 * scale + line_h,
              "STEP", GRAY, scale)
    for s in series:
        points = [to_px(x, y) for x, y in zip(s["x"], s["y"])
                  if np.isfinite(y)]
        color, dash = s.get("color", BLUE), s.get("dash", 0)
        for (xa, ya), (xb, yb) in zip(points, points[1:]):
            _draw_line(image, xa, ya, xb, yb, color, scale, dash)
        if s.get("markers") or len(points) == 1:
            for x, y in points:
                _draw_line(image, x - scale, y, x + scale, y, color,
                           2 * scale + 1)
    # Legend under the axis labels.
    for row, s in enumerate(series):
        ly = py1 + 2 * scale + line_h * (row + 2)
        _draw_line(image, px0, ly + 2 * scale, px0 + 8 * scale, ly + 2 * scale,
                   s.get("color", BLUE), scale, s.get("dash", 0))
        draw_text(image, px0 + 11 * scale, ly, s.get("label", ""), BLACK, scale)


def line_chart(panels, columns=2, panel_size=(420, 300), scale=2):
    """Draws panels of line series into an RGB image.

    Args:
        panels: a list of dicts: `title`, `series` (a list of dicts with `x`,
            `y`, and optional `label`, `color` (RGB tuple), `dash` (dash length
            in pixels, 0 for solid), `markers`), optional `y_min`.
        columns: panels per row.
        panel_size: `(width, height)` of one panel in pixels.
        scale: size of the font and the line thickness.

    Returns:
        A `uint8` array of shape `[height, width, 3]`.
    """
    rows = max(1, -(-len(panels) // columns))
    width, height = panel_size
    image = np.full((rows * height, columns * width, 3), 255, np.uint8)
    for index, panel in enumerate(panels):
        row, col = divmod(index, columns)
        _draw_panel(image, col * width + 4 * scale, row * height + 4 * scale,
                    width - 8 * scale, height - 8 * scale, panel, scale)
    return image


def encode_png(image):
    """PNG bytes of an RGB `uint8` array `[height, width, 3]`."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError("Expected an RGB image [height, width, 3]. "
                         f"Received shape {image.shape}")
    height, width = image.shape[:2]
    # Filter type 0 (none) at the start of every row.
    raw = b"".join(b"\x00" + image[row].tobytes() for row in range(height))

    def chunk(kind, data):
        body = kind + data
        return (struct.pack(">I", len(data)) + body +
                struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def write_png(path, image):
    """Writes an RGB array as a PNG file."""
    with open(path, "wb") as f:
        f.write(encode_png(image))


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
