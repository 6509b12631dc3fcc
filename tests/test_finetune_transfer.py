"""Pretraining helps fine-tuning: the main job (`albert_apps.quickstart`) on a
reduced budget fine-tunes its exported encoder, loaded as a Keras layer, to
a dev accuracy well above the same model trained from random
initialization, on a task of text that pretraining never saw.

The job's defaults (3M characters, 3000 steps, 3 fine-tuning seeds) take
about 8 minutes; this test runs its stages on a third of the text for 2000
steps, one fine-tuning seed, about 5 minutes on 2 CPU cores. The task
(`albert_apps.quickstart.downstream`): docstrings of standard-library packages
left out of pretraining, each cut at a random sentence boundary into halves
kept in order or swapped; 200 training pairs, 1100 dev pairs from other
documents.
"""

import time

import pytest

from albert_apps import quickstart

# max_train_seconds is only a guard against a hung or far too slow machine:
# the test fails, rather than comparing a model trained for fewer steps, if
# the budget stops training early.
BUDGET = dict(max_corpus_chars=1_000_000, vocab_size=2000, max_seq_length=64,
              num_train_steps=2000, train_seconds=900, train_batch_size=32,
              dupe_factor=10, finetune_seeds=(0,), finetune_steps=200)


@pytest.mark.slow
def test_pretrained_encoder_beats_random_init_on_unseen_text(tmp_path):
    start = time.time()
    report = quickstart.run(str(tmp_path / "qs"), **BUDGET)
    pretrained = report["finetune"]["runs"]["pretrained"][0]["dev_accuracy"]
    random_init = report["finetune"]["runs"]["random_init"][0]["dev_accuracy"]
    print("pretrained %.4f, random init %.4f; held-out %s; %.0f s" % (
        pretrained, random_init, report["results"]["curve"],
        time.time() - start))
    # Every step ran: the result does not depend on the machine's speed.
    assert not report["pretrain"]["stopped_by_time_budget"]
    assert report["pretrain"]["steps"] == BUDGET["num_train_steps"]
    assert report["finetune"]["task"] == {"train": 200, "dev": 1100}
    # Measured on 2 CPU cores (AVX-512): pretrained / random init dev
    # accuracy 0.784 / 0.588 (held-out SOP 0.748 at step 2000). With the
    # job's defaults (3000 steps, 3 seeds) the margin was 19.7 to 25.7
    # points (at 1500 steps here: 0.729 / 0.598).
    assert pretrained >= random_init + 0.05
    assert pretrained > 0.65
    # The served classifier answers as the fine-tuned model did.
    assert report["queries"]["classifier"]["accuracy"] == pytest.approx(
        pretrained, abs=0.005)
