"""The programs above the library: jobs that compose `data_prep`, `albert_tf`
and `export` (the main job, `python -m albert_apps.quickstart`). Nothing in
the library imports them."""
