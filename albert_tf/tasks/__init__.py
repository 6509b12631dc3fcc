"""Fine-tuning tasks: GLUE, SQuAD v1.1/v2.0 and RACE.

- `finetuning_task`: fine-tuning as a task of the one `Trainer`;
  `finetuning_jobs`: one job per benchmark (the official programs
  `albert_apps.run_classifier`, `run_squad`, `run_race` run them).
- `tokenization`: pretraining's preprocessing + SentencePiece, with character
  offsets for span tasks.
- `glue_reader`, `squad_reader`, `race_reader`: readers of the public formats
  as distributed, features, prediction files in each benchmark's submission
  format.
- `metrics`: the benchmarks' metrics in NumPy.
- `text_models`, `masked_lm`: Keras models on raw strings
  (`AlbertTextClassifier`, `AlbertMaskedLM`); `fill_mask`: the `[MASK]`
  predictions they and the exported SavedModel share.
"""
