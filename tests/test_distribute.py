import pytest
import tensorflow as tf

from albert_tf.training import distribute


def test_default_choice_and_one_device():
    assert distribute.default_strategy_name(tpu="my-tpu") == "tpu"
    if not tf.config.list_physical_devices("GPU"):
        assert distribute.default_strategy_name() == "one_device"
    strategy = distribute.get_strategy(None)
    assert strategy.num_replicas_in_sync == 1
    assert distribute.is_chief(strategy)
    assert isinstance(distribute.get_strategy("mirrored"),
                      tf.distribute.MirroredStrategy)


def test_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="'gpu_pod'"):
        distribute.get_strategy("gpu_pod")
    with pytest.raises(ValueError, match="tpu=None"):
        distribute.get_strategy("tpu")


def test_tpu_resolution_connects_unless_local(monkeypatch):
    calls = []

    class FakeResolver:
        def __init__(self, tpu, zone, project):
            calls.append(("resolve", tpu, zone, project))

        def master(self):
            return "grpc://fake"

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver",
                        FakeResolver)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                        lambda r: calls.append(("connect",)))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                        lambda r: calls.append(("initialize",)))
    distribute.resolve_tpu("local")
    assert calls == [("resolve", "local", None, None), ("initialize",)]
    calls.clear()
    distribute.resolve_tpu("my-tpu", "us-central2-b", "proj")
    assert calls == [("resolve", "my-tpu", "us-central2-b", "proj"),
                     ("connect",), ("initialize",)]


def test_is_chief_in_a_cluster():
    spec = tf.train.ClusterSpec({"worker": ["a:1", "b:2"]})

    class FakeStrategy:
        def __init__(self, task_type, task_id, cluster=spec):
            resolvers = tf.distribute.cluster_resolver
            self.cluster_resolver = resolvers.SimpleClusterResolver(
                cluster, task_type=task_type, task_id=task_id)

    assert distribute.is_chief(FakeStrategy("worker", 0))
    assert not distribute.is_chief(FakeStrategy("worker", 1))
    with_chief = tf.train.ClusterSpec({"chief": ["c:0"], "worker": ["a:1"]})
    assert distribute.is_chief(FakeStrategy("chief", 0, with_chief))
    assert not distribute.is_chief(FakeStrategy("worker", 0, with_chief))
