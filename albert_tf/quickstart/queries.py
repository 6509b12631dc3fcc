"""Questions asked of the exported SavedModel, through its signatures.

The queries go through the served model (not the Keras one) so that the
answers show what TF Serving would answer for raw text.
"""

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SavedModel's ops)

FILL_MASK_QUERIES = (
    "Return the [MASK] of the list.",
    "If the file does not exist, an [MASK] is raised.",
    "This module provides functions for working with [MASK].",
)
NEIGHBOUR_QUERY = "Read the contents of the file."
NEIGHBOUR_CANDIDATES = (
    "Write the data to the file.",
    "Open the file and return a stream.",
    "Return the square root of x.",
    "Create a new thread and start it.",
    "Raise an exception if the socket is closed.",
    "Convert the string to lower case.",
)


def fill_mask(model, queries):
    """The top predictions of the first mask of each query.

    Returns:
        A list with, per query, a dict: `query` and `predictions` (a list of
        `[piece, probability]`, most probable first).
    """
    out = model.signatures["fill_mask"](text=tf.constant(list(queries)))
    pieces = out["top_k_pieces"].numpy()
    probabilities = out["top_k_probabilities"].numpy()
    return [{"query": text,
             "predictions": [[piece.decode("utf-8"), round(float(p), 4)]
                             for piece, p in zip(pieces[i, 0],
                                                 probabilities[i, 0])]}
            for i, text in enumerate(queries)]


def nearest_neighbours(model, query, candidates):
    """Candidates ranked by similarity of their `pooled_output` to the query's.

    Returns:
        A dict: `query` and `ranking` (a list of `[candidate, cosine]`,
        highest first).
    """
    texts = [query] + list(candidates)
    pooled = model.signatures["serving_default"](
        text=tf.constant(texts), text_b=tf.constant([], tf.string))[
            "pooled_output"]
    pooled = pooled.numpy().astype(np.float64)
    # Centered: pooled outputs of one model share a large common component
    # (the tanh of the pooler's bias), which makes raw cosines all near 1.
    pooled -= pooled.mean(axis=0, keepdims=True)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    similarity = pooled[1:] @ pooled[0]
    order = np.argsort(-similarity, kind="stable")
    return {"query": query,
            "ranking": [[candidates[i], round(float(similarity[i]), 4)]
                        for i in order]}


def query_saved_model(path, fill_mask_queries=FILL_MASK_QUERIES,
                      neighbour_query=NEIGHBOUR_QUERY,
                      candidates=NEIGHBOUR_CANDIDATES):
    """Queries an exported text-in SavedModel through its signatures.

    Args:
        path: the SavedModel (`<export_dir>/<model_name>/<version>`).
        fill_mask_queries: texts holding `[MASK]`.
        neighbour_query: the text whose neighbours are ranked.
        candidates: the texts ranked.

    Returns:
        A dict: `fill_mask` (see `fill_mask`) and `nearest_neighbours` (see
        `nearest_neighbours`; cosines after subtracting the mean over the
        query and the candidates).
    """
    model = tf.saved_model.load(path)
    return {"fill_mask": fill_mask(model, fill_mask_queries),
            "nearest_neighbours": nearest_neighbours(
                model, neighbour_query, candidates)}
