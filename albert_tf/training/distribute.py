"""Choosing and building the tf.distribute strategy for pretraining.

`get_strategy(None, ...)` picks TPUStrategy when a TPU is named, else
MirroredStrategy over every local GPU, else a OneDeviceStrategy on the CPU.
"""

import tensorflow as tf
from absl import logging

from albert_tf.training.options import STRATEGIES


def resolve_tpu(tpu, tpu_zone=None, gcp_project=None):
    """Resolves, connects to (unless local) and initializes a TPU system.

    Args:
        tpu: the TPU name or `grpc://` address; `"local"` (or "") on a TPU VM.
        tpu_zone: GCE zone of a named TPU (optional: looked up otherwise).
        gcp_project: GCP project of a named TPU (optional).

    Returns:
        The `TPUClusterResolver`.
    """
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=tpu, zone=tpu_zone, project=gcp_project)
    if tpu not in ("", "local"):
        # A remote TPU worker: the host program runs elsewhere.
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    logging.info("TPU system initialized: %s", resolver.master())
    return resolver


def default_strategy_name(tpu=None):
    """`"tpu"` if a TPU is named, `"mirrored"` with GPUs, else `"one_device"`."""
    if tpu is not None:
        return "tpu"
    if tf.config.list_physical_devices("GPU"):
        return "mirrored"
    return "one_device"


def get_strategy(name=None, tpu=None, tpu_zone=None, gcp_project=None,
                 devices=None):
    """Builds a distribution strategy.

    Args:
        name: one of `STRATEGIES`, or None for `default_strategy_name(tpu)`.
        tpu: TPU name or address (for `"tpu"`; `"local"` on a TPU VM).
        tpu_zone: GCE zone of the TPU.
        gcp_project: GCP project of the TPU.
        devices: devices for `"mirrored"` (default: all GPUs, else CPU) or the
            device for `"one_device"` (default: the first GPU, else CPU).

    Returns:
        A `tf.distribute.Strategy`. `"multi_worker"` reads the cluster from
        the `TF_CONFIG` environment variable.

    Raises:
        ValueError: for an unknown name, or `"tpu"` without `tpu`.
    """
    if name is None:
        name = default_strategy_name(tpu)
    if name not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}. "
                         f"Received: strategy={name!r}")
    if name == "tpu":
        if tpu is None:
            raise ValueError("strategy='tpu' needs a TPU: pass tpu='local' on "
                             "a TPU VM or the TPU's name. Received: tpu=None")
        strategy = tf.distribute.TPUStrategy(
            resolve_tpu(tpu, tpu_zone, gcp_project))
    elif name == "multi_worker":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    elif name == "mirrored":
        strategy = tf.distribute.MirroredStrategy(devices=devices)
    else:
        if devices is None:
            devices = ("/gpu:0" if tf.config.list_physical_devices("GPU")
                       else "/cpu:0")
        elif not isinstance(devices, str):
            (devices,) = devices
        strategy = tf.distribute.OneDeviceStrategy(devices)
    logging.info("Strategy %s with %d replica(s).", type(strategy).__name__,
                 strategy.num_replicas_in_sync)
    return strategy


def is_chief(strategy):
    """Whether this process writes summaries, logs and the real checkpoints.

    In a multi-worker cluster it is the `chief` task, or worker 0 when there
    is no chief; a single-process strategy is always chief.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or isinstance(
            resolver, tf.distribute.cluster_resolver.TPUClusterResolver):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief


def is_single_process(strategy):
    """Whether this process runs every replica of `strategy` (no cluster of
    workers whose compiled calls must agree step for step)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return True
    try:
        spec = resolver.cluster_spec().as_dict()
    except (ValueError, RuntimeError, tf.errors.OpError):
        return False
    return sum(len(tasks) for tasks in spec.values()) <= 1
