"""The main job's default budget (no heavy imports: `--help` reads it).

Sized so that the whole job takes minutes on a laptop-class CPU (the
times per CPU are in docs/benchmarks.md); the time budget stops a slower
machine's run and saves it to resume.

Pretraining: steps of batch 32, the time budget of one run, and the
checkpoints evaluated over the run. Fine-tuning: the seeds of each
initialization (pretrained and random) and the steps of each run.
"""

NUM_TRAIN_STEPS = 1500
TRAIN_SECONDS = 300
NUM_CHECKPOINTS = 5
FINETUNE_SEEDS = (0, 1, 2)
FINETUNE_STEPS = 100
