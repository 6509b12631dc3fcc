"""The interface between a job and the `Trainer`.

A job (pretraining, a fine-tuning task) subclasses `TrainingTask`: it says
how to build the model, what the data is, what the loss is as additive
statistics, and how to evaluate; the `Trainer` does the rest.
"""


class TrainingTask:
    """What a job tells the `Trainer` (subclasses implement the methods).

    Attributes:
        stat_names: the additive statistics `stats` returns (sums over a
            batch, so they add up over replicas, micro-batches and batches).
        best_metric: the evaluation metric that picks `best/` (higher wins).
    """

    stat_names = ()
    best_metric = None

    def build_model(self, dtype):
        """The Keras model, under the dtype policy `dtype` (None: float32)."""
        raise NotImplementedError

    def check_inputs(self):
        """Checks the job's input files before the run writes anything
        (called by `Trainer.restore`); raises `ValueError` naming the flag
        and the file at fault."""

    def initialize(self, model):
        """Called on a fresh start (no checkpoint to resume): load initial
        weights if the job has them."""

    def input_files(self):
        """`{flag: [files]}`: the files the run's result is made from (its
        records, data files, vocabulary), whose content the run record
        fingerprints so that a resumed run refuses inputs that changed
        under the same names (`output_folder.claim_run`)."""
        return {}

    def chance_loss(self):
        """The training loss of a model that ignores its input (the best
        constant prediction), if the task knows it: a run that ends there
        has not learned, and the `Trainer` says so. None: unknown."""
        return None

    def config_files(self):
        """`{file name: JSON-able dict}` written beside the checkpoints and
        checked when a run resumes."""
        return {}

    def model_files(self):
        """`{file name: source path}` copied beside the checkpoints and
        into every `best/`, with the config files, so that each is a
        complete model folder (the vocabulary, `spm.model`)."""
        return {}

    def train_dataset(self, input_context, global_batch_size, skip_batches):
        """Training batches for one input pipeline (per-replica batch size,
        static), endless, the first `skip_batches` skipped."""
        raise NotImplementedError

    def denominators(self, features):
        """Float32 `[D]`: the loss's denominators on this shard (summed over
        replicas before the loss is taken)."""
        raise NotImplementedError

    def stats(self, model, features, training):
        """Float32 `[len(stat_names)]`: the shard's statistics."""
        raise NotImplementedError

    def loss(self, stats, denominators):
        """The shard's share of the global loss (numerators over global
        denominators), so that the shares add up to the batch loss."""
        raise NotImplementedError

    def metrics(self, stats):
        """Named metrics (`loss` first) from summed statistics."""
        raise NotImplementedError

    def describe_evaluation(self, metrics):
        """A line putting `evaluate`'s metrics beside their baselines
        (chance, the majority class), logged after each evaluation; None:
        nothing to add."""
        del metrics
        return None

    def evaluate(self, evaluator):
        """Evaluation metrics of the model's current weights (a dict holding
        `best_metric`), computed with `evaluator` (an
        `evaluation.Evaluator`: `predict`, `sum_stats`)."""
        raise NotImplementedError
