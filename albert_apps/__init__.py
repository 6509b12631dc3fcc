"""The programs above the library: jobs that compose `data_prep`, `albert_tf`
and `export` (the main job, `python -m albert_apps.quickstart`, and the
fine-tuning programs that export their models, `python -m
albert_apps.run_classifier` and `python -m albert_apps.run_squad`), and the
statistics their reports and the benchmarks share (`albert_apps.intervals`).
Nothing in the library imports them."""
