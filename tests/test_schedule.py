"""WarmupPolynomialDecay against the official schedule."""

import numpy as np

from albert_tf.training.schedule import WarmupPolynomialDecay
from tests.fixtures_pretraining import official_lr


def test_schedule_is_official():
    schedule = WarmupPolynomialDecay(2.0, 100, 10, poly_power=2.0)
    for step in (0, 5, 9, 10, 50, 99, 100, 150):
        np.testing.assert_allclose(schedule(step).numpy(),
                                   official_lr(step, 2.0, 100, 10, 2.0),
                                   rtol=1e-5, atol=1e-7)
    no_warmup = WarmupPolynomialDecay(1.0, 10)
    np.testing.assert_allclose(no_warmup(0).numpy(), 1.0)
    clone = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert clone.get_config() == schedule.get_config()
