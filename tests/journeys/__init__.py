"""User journeys: the command blocks of the README and of `docs/`, run as a
user types them.

Each module follows one path through the programs (`python -m ...` in a
subprocess, real flags, real files) on tiny generated data, reading its
commands from the documentation (`documented.command`), and checks the files
and answers the documentation promises at every stop:

- `test_pretrain_journey`: text -> vocabulary -> sharded records ->
  pretraining with evaluation -> resume -> export -> serving from a fresh
  process.
- `test_finetune_journey`: each fine-tuning program (GLUE, SQuAD v1.1 and
  v2.0, RACE) from the pretrained model, with its submissions and exports.
- `test_convert_journey`: the checkpoint conversions and their round trips.

`documented` finds the commands and names the journey that runs each;
`common` holds the shared steps; the pretraining workspace is made once per
process and shared by the journeys that start from it.
"""
