"""The ALBERT paper's claims, reproduced in miniature on one CPU machine.

`python -m benchmarks.paper_claims` (or `job.run`) builds the quickstart's
data plus NSP records (`data`), pretrains small ALBERTs with one recipe
(`runs`), runs four studies (`studies`): the factorized embedding (paper
Table 3), cross-layer sharing (Table 4), SOP vs NSP (Table 5) and learning
parity with keras-hub's ALBERT (`peer`); judges each claim by stated rules
(`verdicts`) and writes `paper_claims.md` and `paper_claims.svg`
(`report`).
"""
