"""How the test suite runs fast: worker grouping, garbage collection and XLA
flags (a pytest plugin that tests/conftest.py loads).

None of it changes what a test checks:
- `XDIST_GROUPS` keeps the modules that share an expensive fixture on one
  pytest-xdist worker, so the fixture is built once.
- The modules imported before the first test are frozen out of the garbage
  collector's reach, and it runs less often.
- XLA compiles the same HLO with flags that make the CPU backend's code
  generation cheaper.
"""

import gc
import os

# --- Parallel runs (pytest-xdist, `-n 2 --dist loadgroup` in pyproject.toml) ---
# Modules that share an expensive session fixture or an in-process cache run
# on one worker, so it is built once: group name -> module file names.
XDIST_GROUPS = {
    # tests/fixtures_export.py: exported_albert, loaded_serving_model,
    # reduced_precision_exports, exported_tasks.
    "exports": ("test_pretrained_export.py", "test_graph_ops.py", "test_keras_layer.py",
                "test_rest_examples.py", "test_serving_compat.py",
                "test_finetuned_exports.py", "test_export.py",
                "test_serving_command.py", "test_python_blocks.py"),
    # tests/journeys/common.py's pretraining run.
    "journeys": ("test_pretrain_journey.py", "test_finetune_journey.py",
                 "test_convert_journey.py"),
    # tests/fixtures_training.py: builtin_quickstart, the main job's run on
    # the built-in corpus.
    "builtin_quickstart": ("test_finetune_transfer.py",
                           "test_pretraining_real_text.py"),
    # tests/fixtures_training.py: short_pretraining_run, one driver run
    # whose folder and log they read.
    "short_pretraining_run": ("test_trainer.py", "test_memory.py",
                              "test_progress.py", "test_xla_autotune.py",
                              "test_convert.py"),
    # Module-scoped fixtures of masking statistics (one per option set, each
    # masking thousands of records with both maskers).
    "masking": ("test_ngram_masking.py",),
    # Module-scoped fixtures that are a fresh process (the imports), or hold
    # traced functions the module's tests reuse: on two workers, each would
    # make them.
    "layering": ("test_layering.py",),
    "kernels": ("test_fused_dispatch.py",),
    "masked_lm": ("test_masked_lm.py",),
    "pipeline": ("test_pipeline.py",),
}
_GROUP_OF = {name: group for group, names in XDIST_GROUPS.items()
             for name in names}


def group_of(nodeid):
    """The xdist scope of a test: its module's group, else the test alone."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return _GROUP_OF.get(module, nodeid)


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` by `XDIST_GROUPS`: each group's tests go to one
    worker, the other tests one by one to whichever worker is free.

    xdist's own loadgroup reads `xdist_group` marks through test ids that it
    rewrites on the workers, which pytest 9.2 no longer lets it do (the
    groups were silently ignored); this groups by module file name on the
    controller instead.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    # Imported here: xdist is needed only by the runs that use it.
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return group_of(nodeid)

    return GroupScheduling(config, log)


# --- Garbage collection ---
def pytest_collection_finish(session):
    """Moves what the test modules imported (TensorFlow, Keras, this
    package) out of the garbage collector's reach.

    A full collection walks every live object, and the tests' traces
    trigger many of them. Only what is alive now is frozen, and never
    freed: modules and their constants.
    """
    del session
    gc.collect()
    gc.freeze()
    # A collection per 20,000 allocations, not 700: a trace allocates
    # objects by the hundred thousand, and each young collection would walk
    # them all again.
    gc.set_threshold(20000, 50, 100)


# --- XLA in the tests ---
# The tests compile many small XLA programs and run each for a few steps, so
# LLVM's backend optimizations cost more time than they save, and the CPU
# backend's older elemental code emitters compile faster than its default
# fusion emitters. The programs are the ones users compile, HLO for HLO:
# only how the CPU backend turns them into machine code changes (what a TPU
# compiles is HLO, not this code). A user's own XLA_FLAGS are kept; the one
# long training run (`builtin_quickstart`) runs in a process with the flags
# the user had (`user_environment`).
FAST_COMPILE_XLA_FLAGS = ("--xla_backend_optimization_level=0 "
                          "--xla_llvm_disable_expensive_passes=true "
                          "--xla_cpu_use_fusion_emitters=false")
# The user's XLA_FLAGS ("" for none), kept for the worker processes too.
USER_XLA_FLAGS = "ALBERT_TESTS_USER_XLA_FLAGS"


def pytest_configure(config):
    """Sets `FAST_COMPILE_XLA_FLAGS` unless the user set XLA_FLAGS (before
    any test module imports TensorFlow, which reads them once)."""
    del config
    if USER_XLA_FLAGS not in os.environ:
        os.environ[USER_XLA_FLAGS] = os.environ.get("XLA_FLAGS", "")
        os.environ.setdefault("XLA_FLAGS", FAST_COMPILE_XLA_FLAGS)


def user_environment():
    """A copy of `os.environ` with the user's own XLA_FLAGS (or none), for
    a subprocess that should compile as a user's run does."""
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    if env.get(USER_XLA_FLAGS):
        env["XLA_FLAGS"] = env[USER_XLA_FLAGS]
    return env
