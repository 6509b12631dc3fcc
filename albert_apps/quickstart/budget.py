"""The main job's default budget (no heavy imports: `--help` reads it).

Pretraining: steps of batch 32, the time budget of one run, and the
checkpoints evaluated over the run. Fine-tuning: the seeds of each
initialization (pretrained and random) and the steps of each run.
"""

NUM_TRAIN_STEPS = 3000
TRAIN_SECONDS = 400
NUM_CHECKPOINTS = 5
FINETUNE_SEEDS = (0, 1, 2)
FINETUNE_STEPS = 100
