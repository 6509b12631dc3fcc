"""The paper's claims in miniature: `python -m benchmarks.paper_claims`.

Pretrains small ALBERTs on the built-in corpus (or --input_file) to test
the paper's factorized-embedding, cross-layer-sharing and SOP-vs-NSP claims,
and this project's model against keras-hub's, and writes
`paper_claims.md` and `paper_claims.svg` (see `benchmarks.paper_claims`).
--quick runs a reduced version in about 3 minutes.
"""

import dataclasses
import sys
from typing import Optional

from absl import logging

from benchmarks.paper_claims import job
from foundation import flag_options as flag_options_lib
from foundation.flag_options import option


@dataclasses.dataclass
class PaperClaimsOptions:
    """The program's flags (the arguments of `job.run`)."""

    output_dir: str = option("runs/paper_claims",
                             "Data and runs (a rerun reuses finished runs).")
    report_dir: Optional[str] = option(
        None, "Where paper_claims.md and paper_claims.svg go (default: "
        "--output_dir).")
    input_file: Optional[str] = option(
        None, "Text corpus (one sentence a line, blank line between "
        "documents); default: the standard library's docstrings.")
    quick: bool = option(
        False, "Reduced study: 2 embedding sizes, 2 sharing schemes, 1 seed, "
        "%d steps a run." % job.QUICK_STEPS)
    num_train_steps: int = option(
        0, "Steps of every pretraining run (0: %d, or %d with --quick)." % (
            job.DEFAULT_STEPS, job.QUICK_STEPS))
    seeds: int = option(0, "Seeds of each model in the parity study (0: 3, "
                        "or 1 with --quick).")


def run_and_print(options):
    """Runs the study and prints where the report went."""
    result = job.run(**dataclasses.asdict(options), command=" ".join(
        ["python -m benchmarks.paper_claims"] + sys.argv[1:]))
    for key in sorted(result["studies"]):
        for claim in result["studies"][key]["claims"]:
            print("%-24s %s" % (claim["verdict"], claim["claim"]))
    print("Report: %s (%s); total %.0f s" % (
        result["report"]["markdown"], result["report"]["chart"],
        result["seconds"]))
    return result


def main(argv=None):
    logging.set_verbosity(logging.INFO)
    flag_options_lib.run_program(PaperClaimsOptions, run_and_print, argv, doc=__doc__)


if __name__ == "__main__":
    main()
