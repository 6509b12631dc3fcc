"""Moved: the main job is `python -m albert_apps.quickstart` (package
`albert_apps.quickstart`), above `export/` in the layer order."""

MOVED_TO = "albert_apps.quickstart"
