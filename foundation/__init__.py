"""The foundation every layer stands on: safe files (`safe_io`), the output
lock (`output_lock`), the run record (`run_record`), archives checked member
by member (`safe_archive`), credentials kept out of logs (`redaction`), the
options and flags machinery (`flag_options`), progress (`progress`),
TensorFlow's quiet start-up (`tf_startup`), local and remote files
(`filesystems`) and the protobuf wire format (`protobuf_wire`).

It imports nothing from the rest of the project, and no TensorFlow at
import, so the data builders' workers use it too. Guide: docs/reliability.md.
"""
