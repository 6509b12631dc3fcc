"""The programs above the library: jobs that compose `data_prep`, `albert_tf`
and `export` (the main job, `python -m albert_apps.quickstart`, and the three
official fine-tuning programs, `python -m albert_apps.run_classifier`,
`albert_apps.run_squad` (both export their models) and
`albert_apps.run_race`), and the statistics their reports and the benchmarks
share (`albert_apps.intervals`).
Nothing in the library imports them."""
